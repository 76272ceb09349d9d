/*
 * cordon-spawner: starts processes for one host process, so that the host does not fork itself for every
 * sandbox. Node's spawn forks the whole host: the kernel copies its page tables, which costs ~35 µs per MB the
 * host holds (1.8 ms for a bare Node, ~19 ms at 580 MB), all of it with the host's event loop blocked. This
 * process holds a few hundred KB, so a fork here costs the same small amount whatever the host's size.
 *
 *   cordon-spawner HOSTPID
 *
 * It dies with the host (parent-death SIGKILL; it refuses to start when its parent is not HOSTPID), and
 * every process it starts dies with it (parent-death SIGKILL again, which cordon's launcher then replaces
 * with its own). fd 1 carries events to the host, one line each:
 *   ready REQ REP       the fds (here) of the request and reply pipes, for the host to open through
 *                       /proc/<pid>/fd; its first request ("hello") says it has, and this closes its copies
 *   fail ID ERRNO       process ID could not be started (chdir or exec failed); its exit follows
 *   exit ID CODE SIGNO  process ID ended: exit code (-1 when signalled) and signal number (0 when it exited)
 * Events are queued here and written as the host reads them: this process never waits for the host to
 * read, because the host may be waiting for the reply to its next request.
 * Requests come on the request pipe: a 4-byte little-endian length, then NUL-terminated fields:
 *   spawn ID FILE CWD DETACHED UMASK STDIO HOSTFDS ARGC ARG... ENVC ENV...   (UMASK in octal)
 *       STDIO has one character per child fd from 0 (up to MAX_FDS): '-' none, 'n' /dev/null, 'r' a pipe
 *       the host reads, 'w' a pipe the host writes (pipes only below MAX_STDIO), 'h' an fd of the host's:
 *       HOSTFDS lists their numbers in the host, comma-separated, one per 'h' in order. Each is reopened
 *       here through /proc/HOSTPID/fd/N with O_PATH, which follows the fd's own file (not a lookup of its
 *       name): meant for the host's O_PATH fds of judged paths, passed on as they are. The reply (on the
 *       reply pipe, at once, before the exec) is "ok PID FD..." with this process's end of each pipe among
 *       the first MAX_STDIO fds (-1 for the others) or "err ERRNO". A request longer than MAX_REQUEST (more
 *       than exec takes) is read and refused with E2BIG.
 *   opened ID           the host has opened its ends (through /proc); this closes its copies
 *   kill ID SIGNO       signal process ID, unless it has already been reaped (so never a reused pid)
 * End of the request pipe: the host is done; exit.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Pipes go to the first MAX_STDIO fds; host fds ('h') to any below MAX_FDS. */
#define MAX_STDIO 16
#define MAX_FDS 1024
/* exec takes at most 6 MiB of arguments and environment (3/4 of the 8 MiB stack limit's cap), so longer
 * requests are refused unread; buffers over BIG_REQUEST are freed after use: every fork copies them. */
#define MAX_REQUEST (8 << 20)
#define BIG_REQUEST (1 << 20)

struct slot {
  char id[32];
  pid_t pid; /* 0 once reaped: the slot stays until the host has opened its ends */
  int host[MAX_STDIO];
  int failure; /* read end of a close-on-exec pipe: the child's errno when its exec failed, else EOF */
};

static struct slot *slots;
static size_t n_slots, cap_slots;
static int events, reply, devnull;
static pid_t spawner_pid, host_pid;

/* Event lines not yet written to the host. */
static char *queue;
static size_t queued, queue_cap;

static void fatal(const char *what) {
  fprintf(stderr, "cordon-spawner: %s: %s\n", what, strerror(errno));
  exit(2);
}

static void flush_events(void) {
  while (queued > 0) {
    ssize_t n = write(events, queue, queued);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      exit(3); /* the host is gone; parent-death SIGKILL is on its way */
    }
    memmove(queue, queue + n, queued - (size_t)n);
    queued -= (size_t)n;
  }
}

static void event(const char *line) {
  size_t len = strlen(line);
  if (queued + len > queue_cap) {
    queue_cap = (queued + len) * 2;
    queue = realloc(queue, queue_cap);
    if (!queue) fatal("memory");
  }
  memcpy(queue + queued, line, len);
  queued += len;
  flush_events();
}

static void answer(const char *line) {
  size_t len = strlen(line);
  /* The host reads the reply at once (it waits for it), so this never blocks for long. */
  if (write(reply, line, len) != (ssize_t)len) exit(3);
}

static struct slot *find(const char *id) {
  for (size_t i = 0; i < n_slots; i++)
    if (strcmp(slots[i].id, id) == 0) return &slots[i];
  return NULL;
}

static void drop(struct slot *s) { *s = slots[--n_slots]; }

/* Queue "fail" if the child reported a failed exec; close the pipe once it has said all it will. */
static void read_failure(struct slot *s) {
  if (s->failure < 0) return;
  int err;
  ssize_t n = read(s->failure, &err, sizeof err);
  if (n < 0 && errno == EAGAIN) return;
  if (n == (ssize_t)sizeof err) {
    char line[64];
    snprintf(line, sizeof line, "fail %s %d\n", s->id, err);
    event(line);
  }
  close(s->failure);
  s->failure = -1;
}

/* The host has its own opens of these now (or never will): a slot whose process is reaped goes too. */
static void close_host_ends(struct slot *s) {
  for (int i = 0; i < MAX_STDIO; i++) {
    if (s->host[i] >= 0) close(s->host[i]);
    s->host[i] = -1;
  }
  if (s->pid == 0) drop(s);
}

static int host_ends_open(const struct slot *s) {
  for (int i = 0; i < MAX_STDIO; i++)
    if (s->host[i] >= 0) return 1;
  return 0;
}

static int read_full(int fd, void *buf, size_t len) {
  for (size_t got = 0; got < len;) {
    ssize_t n = read(fd, (char *)buf + got, len - got);
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      fatal("read request");
    }
    got += (size_t)n;
  }
  return 1;
}

/* In the child, before the exec: never returns. */
static void become(int failure, const char *file, const char *cwd, int detached, mode_t mask, int n_fds,
                   int *child_end, char **argv, char **envp) {
  static int moved[MAX_FDS];
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  signal(SIGPIPE, SIG_DFL); /* ignored here, and an ignored signal stays ignored across exec */
  /* Dies with the spawner; the check closes the window in which it died before the prctl. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != spawner_pid) goto failed;
  if (detached) setsid();
  umask(mask); /* the host's of the moment, as a fork of the host would have */
  /* Everything still needed is moved above every target first, so that no dup2 overwrites it: the child
     ends, and the pipe that reports a failed exec. */
  int top = n_fds;
  int report = fcntl(failure, F_DUPFD_CLOEXEC, top);
  if (report < 0) goto failed;
  failure = report;
  for (int i = 0; i < n_fds; i++) {
    moved[i] = child_end[i] < 0 ? -1 : fcntl(child_end[i], F_DUPFD_CLOEXEC, top);
    if (child_end[i] >= 0 && moved[i] < 0) goto failed;
  }
  for (int i = 0; i < n_fds; i++)
    if (moved[i] >= 0 && dup2(moved[i], i) < 0) goto failed;
  if (chdir(cwd) != 0) goto failed;
  execve(file, argv, envp);
failed:;
  int err = errno;
  if (write(failure, &err, sizeof err) != (ssize_t)sizeof err) _exit(127);
  _exit(127);
}

static void close_ends(const int *child_end, int n_fds, const int *host_end) {
  for (int i = 0; i < n_fds; i++)
    if (child_end[i] >= 0 && child_end[i] != devnull) close(child_end[i]);
  for (int i = 0; i < MAX_STDIO; i++)
    if (host_end[i] >= 0) close(host_end[i]);
}

/* The next number of HOSTFDS (comma-separated), advancing *at; -1 when there is none. */
static int next_host_fd(const char **at) {
  if (**at < '0' || **at > '9') return -1;
  char *end;
  long fd = strtol(*at, &end, 10);
  if (fd > 1 << 20 || (*end != ',' && *end != '\0')) return -1;
  *at = *end ? end + 1 : end;
  return (int)fd;
}

static void spawn_request(char **f, int n) {
  char line[64 + 12 * MAX_STDIO], proc_fd[64];
  /* spawn ID FILE CWD DETACHED UMASK STDIO HOSTFDS ARGC ARG... ENVC ENV... */
  if (n < 10) goto invalid;
  const char *id = f[1], *file = f[2], *cwd = f[3], *stdio = f[6], *host_fds = f[7];
  int detached = strcmp(f[4], "1") == 0, n_fds = (int)strlen(stdio);
  mode_t mask = (mode_t)strtol(f[5], NULL, 8) & 0777;
  long argc = strtol(f[8], NULL, 10);
  if (strlen(id) >= sizeof slots->id || n_fds < 3 || n_fds > MAX_FDS || argc < 1 || argc > n - 10) goto invalid;
  char **argv = f + 9;
  long envc = strtol(f[9 + argc], NULL, 10);
  if (envc < 0 || 10 + argc + envc != n) goto invalid;
  char **envp = f + 10 + argc; /* ends at f[n], which is NULL */
  argv[argc] = NULL;           /* was the ENVC field, already read */

  static int child_end[MAX_FDS];
  int host_end[MAX_STDIO], failure[2] = {-1, -1};
  for (int i = 0; i < MAX_FDS; i++) child_end[i] = -1;
  for (int i = 0; i < MAX_STDIO; i++) host_end[i] = -1;
  for (int i = 0; i < n_fds; i++) {
    int p[2], fd;
    switch (stdio[i]) {
    case '-': break;
    case 'n': child_end[i] = devnull; break;
    case 'r':
    case 'w':
      if (i >= MAX_STDIO) goto refused;
      if (pipe2(p, O_CLOEXEC) != 0) goto failed;
      child_end[i] = stdio[i] == 'r' ? p[1] : p[0];
      host_end[i] = stdio[i] == 'r' ? p[0] : p[1];
      break;
    case 'h':
      if ((fd = next_host_fd(&host_fds)) < 0) goto refused;
      snprintf(proc_fd, sizeof proc_fd, "/proc/%d/fd/%d", (int)host_pid, fd);
      if ((child_end[i] = open(proc_fd, O_PATH | O_CLOEXEC)) < 0) goto failed;
      break;
    default: goto refused;
    }
  }
  if (*host_fds) goto refused; /* more numbers than 'h' entries */
  if (n_slots == cap_slots) {
    size_t cap = cap_slots ? cap_slots * 2 : 64;
    struct slot *grown = realloc(slots, cap * sizeof *slots);
    if (!grown) goto failed;
    slots = grown;
    cap_slots = cap;
  }
  if (pipe2(failure, O_CLOEXEC) != 0) goto failed;
  pid_t pid = fork();
  if (pid < 0) goto failed;
  if (pid == 0) become(failure[1], file, cwd, detached, mask, n_fds, child_end, argv, envp);
  close(failure[1]);
  fcntl(failure[0], F_SETFL, O_NONBLOCK);
  struct slot *s = &slots[n_slots++];
  snprintf(s->id, sizeof s->id, "%s", id);
  s->pid = pid;
  s->failure = failure[0];
  int at = snprintf(line, sizeof line, "ok %d", (int)pid);
  for (int i = 0; i < MAX_STDIO; i++) {
    s->host[i] = host_end[i];
    if (i < n_fds) at += snprintf(line + at, sizeof line - (size_t)at, " %d", host_end[i]);
    if (child_end[i] >= 0 && child_end[i] != devnull) close(child_end[i]);
  }
  for (int i = MAX_STDIO; i < n_fds; i++)
    if (child_end[i] >= 0 && child_end[i] != devnull) close(child_end[i]);
  snprintf(line + at, sizeof line - (size_t)at, "\n");
  answer(line);
  return;

failed:
  snprintf(line, sizeof line, "err %d\n", errno);
  close_ends(child_end, n_fds, host_end);
  if (failure[0] >= 0) close(failure[0]);
  if (failure[1] >= 0) close(failure[1]);
  answer(line);
  return;
refused:
  close_ends(child_end, n_fds, host_end);
invalid:
  answer("err 22\n");
}

static void reap(int sfd) {
  struct signalfd_siginfo info;
  while (read(sfd, &info, sizeof info) == sizeof info) {
  }
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (size_t i = 0; i < n_slots; i++) {
      if (slots[i].pid != pid) continue;
      read_failure(&slots[i]); /* written before it exited: "fail" goes before "exit" */
      char line[96];
      snprintf(line, sizeof line, "exit %s %d %d\n", slots[i].id, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
               WIFSIGNALED(status) ? WTERMSIG(status) : 0);
      event(line);
      /* A quick process can end before the host has opened its ends: they stay until it has. */
      if (host_ends_open(&slots[i])) slots[i].pid = 0;
      else drop(&slots[i]);
      break;
    }
  }
}

/* Read and handle one request; 0 at the end of the request pipe. */
static int request(int req, int *hello_fds) {
  static char *buf;
  static size_t cap;
  static char **fields;
  static size_t fields_cap;
  uint32_t len;
  if (!read_full(req, &len, sizeof len)) return 0;
  len = le32toh(len);
  if (len == 0) fatal("empty request");
  if (len > MAX_REQUEST) {
    /* Only a spawn request can be this long: read it away and refuse it, as exec would. */
    char sink[65536];
    for (uint32_t left = len; left > 0;) {
      uint32_t chunk = left < sizeof sink ? left : (uint32_t)sizeof sink;
      if (!read_full(req, sink, chunk)) return 0;
      left -= chunk;
    }
    answer("err 7\n");
    return 1;
  }
  if (len + 1 > cap) {
    free(buf);
    cap = len + 1;
    buf = malloc(cap);
    if (!buf) fatal("memory");
  }
  if (!read_full(req, buf, len)) return 0;
  buf[len] = '\0';
  size_t n = 0;
  for (uint32_t i = 0; i < len; i++) n += buf[i] == '\0';
  if (buf[len - 1] != '\0') n++;
  if (n + 1 > fields_cap) {
    free(fields);
    fields_cap = n + 1;
    fields = malloc(fields_cap * sizeof *fields);
    if (!fields) fatal("memory");
  }
  n = 0;
  for (char *at = buf; at < buf + len; at += strlen(at) + 1) fields[n++] = at;
  fields[n] = NULL;
  if (strcmp(fields[0], "hello") == 0) {
    for (int i = 0; i < 2; i++) close(hello_fds[i]);
  } else if (strcmp(fields[0], "spawn") == 0) {
    spawn_request(fields, (int)n);
  } else if (strcmp(fields[0], "opened") == 0 && n == 2) {
    struct slot *s = find(fields[1]);
    if (s) close_host_ends(s);
  } else if (strcmp(fields[0], "kill") == 0 && n == 3) {
    struct slot *s = find(fields[1]);
    if (s && s->pid > 0) kill(s->pid, (int)strtol(fields[2], NULL, 10));
  } else {
    errno = EINVAL;
    fatal(fields[0]);
  }
  /* A request holds a run's argv and environment (its secrets): nothing of it stays here once handled. */
  explicit_bzero(buf, len);
  if (cap > BIG_REQUEST) {
    free(buf);
    free(fields);
    buf = NULL;
    fields = NULL;
    cap = fields_cap = 0;
  }
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: cordon-spawner HOSTPID\n");
    return 2;
  }
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fatal("parent-death signal");
  host_pid = (pid_t)strtol(argv[1], NULL, 10);
  if (getppid() != host_pid) return 1; /* the host is already gone */
  spawner_pid = getpid();
  /* What the host left open without close-on-exec would reach every process started here. */
  if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
    for (int fd = 3; fd < 1024; fd++) close(fd);
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  events = fcntl(1, F_DUPFD_CLOEXEC, 3); /* this process's end of the socket (fd 1 is /dev/null from here) */
  int req[2], rep[2];
  if (sfd < 0 || devnull < 0 || events < 0 || pipe2(req, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0)
    fatal("set-up");
  fcntl(events, F_SETFL, O_NONBLOCK);
  dup2(devnull, 1); /* fd 1 stays taken, by nothing that matters */
  reply = rep[1];
  char line[64];
  snprintf(line, sizeof line, "ready %d %d\n", req[1], rep[0]);
  event(line);

  int hello_fds[2] = {req[1], rep[0]};
  struct pollfd *p = NULL;
  size_t p_cap = 0;
  for (;;) {
    size_t n_p = 3 + n_slots;
    if (n_p > p_cap) {
      p_cap = n_p * 2;
      p = realloc(p, p_cap * sizeof *p);
      if (!p) fatal("memory");
    }
    p[0] = (struct pollfd){.fd = req[0], .events = POLLIN};
    p[1] = (struct pollfd){.fd = sfd, .events = POLLIN};
    p[2] = (struct pollfd){.fd = queued > 0 ? events : -1, .events = POLLOUT};
    for (size_t i = 0; i < n_slots; i++) p[3 + i] = (struct pollfd){.fd = slots[i].failure, .events = POLLIN};
    if (poll(p, (nfds_t)n_p, -1) < 0) {
      if (errno == EINTR) continue;
      fatal("poll");
    }
    for (size_t i = 0; i < n_slots && 3 + i < n_p; i++)
      if (p[3 + i].revents && slots[i].failure == p[3 + i].fd) read_failure(&slots[i]);
    if (p[1].revents) reap(sfd);
    if (p[2].revents) flush_events();
    if (p[0].revents && !request(req[0], hello_fds)) return 0;
  }
}
