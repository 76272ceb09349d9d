/*
 * cordon-bridge: the network allowlist's way out of a sandbox's own network namespace.
 *
 *   cordon-bridge --dir=DIR --http=PORT --socks=PORT -- PROGRAM [ARGS...]
 *
 * bwrap runs it as the sandbox's first program, bound read-only at a fixed path, so it works on any root
 * filesystem. In order:
 *   1. It reads this run's token line (64 hex digits and a newline) from fd 9, which cordon pipes to it
 *      and nothing else reads, and closes fd 9. The token is never in an argv (every process of the same
 *      uid can read those), a file or the program's environment.
 *   2. It listens on 127.0.0.1:PORT for HTTP and SOCKS5, before the program runs: nothing polls for them.
 *   3. It forks one relay process (parent-death SIGKILL; not dumpable, so the program cannot read the
 *      token out of its memory through /proc), and execs the program.
 * The relay accepts up to MAX_CONNS connections at once (the rest wait in the listen backlog) and for
 * each connects to DIR/http.sock or DIR/socks.sock, writes the token, then copies bytes both ways through
 * two bounded buffers, non-blocking, in one poll loop. Half-closes pass through; an error on one side
 * ends its direction, and the connection closes when both directions have ended.
 *
 * Its own failures exit 125 with a line on stderr naming it; a program that cannot be executed is 127
 * (not found) or 126, as a shell would say.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define TOKEN_FD 9
#define TOKEN_LINE 65
#define MAX_CONNS 64
#define BUF_SIZE 16384
/* A proxy socket whose backlog is full is tried again this often, for at most CONNECT_TRIES times. */
#define RETRY_MS 10
#define CONNECT_TRIES 500

static char token[TOKEN_LINE];

static void die(const char *what) {
  fprintf(stderr, "cordon-bridge: %s: %s\n", what, strerror(errno));
  _exit(125);
}

static void usage(const char *what) {
  fprintf(stderr, "cordon-bridge: %s\nusage: cordon-bridge --dir=DIR --http=PORT --socks=PORT -- PROGRAM [ARGS...]\n", what);
  _exit(125);
}

static const char *prefixed(const char *arg, const char *prefix) {
  size_t n = strlen(prefix);
  return strncmp(arg, prefix, n) == 0 ? arg + n : NULL;
}

static int port_of(const char *text) {
  char *end;
  long port = strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || port < 1 || port > 65535) usage("a port is 1-65535");
  return (int)port;
}

static void read_token(void) {
  size_t got = 0;
  while (got < TOKEN_LINE) {
    ssize_t n = read(TOKEN_FD, token + got, TOKEN_LINE - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("reading the token on fd 9");
    if (n == 0) {
      fprintf(stderr, "cordon-bridge: fd 9 ended before the token\n");
      _exit(125);
    }
    got += (size_t)n;
  }
  close(TOKEN_FD);
  for (int i = 0; i < TOKEN_LINE - 1; i++)
    if (!((token[i] >= '0' && token[i] <= '9') || (token[i] >= 'a' && token[i] <= 'f'))) usage("a malformed token on fd 9");
  if (token[TOKEN_LINE - 1] != '\n') usage("a malformed token on fd 9");
}

static int listen_on(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(fd, (struct sockaddr *)&at, sizeof at) != 0) die("bind 127.0.0.1");
  if (listen(fd, 128) != 0) die("listen");
  return fd;
}

/* One direction of a connection: bytes read from `from`, waiting to be written to the other side. */
struct flow {
  char buf[BUF_SIZE];
  size_t start, end;
  int eof;  /* nothing more will be read from its source */
  int done; /* its destination has been shut down (or failed): this direction is over */
};

struct conn {
  int used;
  int fd[2];  /* 0: the client (TCP), 1: cordon's proxy (unix) */
  struct flow flow[2]; /* flow[i]: from fd[i] to fd[1 - i] */
  int tries;  /* connect attempts left while the proxy's backlog is full; 0 once connected */
  long long retry_at;
  struct sockaddr_un proxy;
};

static struct conn conns[MAX_CONNS];
static int n_conns;

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void drop(struct conn *c) {
  close(c->fd[0]);
  if (c->fd[1] >= 0) close(c->fd[1]);
  c->used = 0;
  n_conns--;
}

/* Try to connect to the proxy: 1 connected (token queued), 0 try again later, -1 give up. */
static int try_connect(struct conn *c) {
  if (c->fd[1] < 0) c->fd[1] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd[1] < 0) return -1;
  if (connect(c->fd[1], (struct sockaddr *)&c->proxy, sizeof c->proxy) == 0) {
    c->tries = 0;
    memcpy(c->flow[0].buf, token, TOKEN_LINE); /* the token goes first, before anything of the client */
    c->flow[0].end = TOKEN_LINE;
    return 1;
  }
  if ((errno == EAGAIN || errno == EINTR) && --c->tries > 0) {
    c->retry_at = now_ms() + RETRY_MS;
    return 0;
  }
  return -1;
}

static void accept_from(int listener, const char *dir, const char *name) {
  while (n_conns < MAX_CONNS) {
    int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    struct conn *c = conns;
    while (c->used) c++;
    c->used = 1;
    c->fd[0] = fd;
    c->fd[1] = -1;
    for (int i = 0; i < 2; i++) c->flow[i].start = c->flow[i].end = c->flow[i].eof = c->flow[i].done = 0;
    c->tries = CONNECT_TRIES;
    c->proxy.sun_family = AF_UNIX;
    snprintf(c->proxy.sun_path, sizeof c->proxy.sun_path, "%s/%s", dir, name);
    n_conns++;
    if (try_connect(c) < 0) drop(c);
  }
}

static int gone(int err) { return err != EAGAIN && err != EWOULDBLOCK && err != EINTR; }

/* Stop flow i for good: its destination is gone, so nothing more is read for it. */
static void abandon(struct conn *c, int i) {
  c->flow[i].done = 1;
  shutdown(c->fd[i], SHUT_RD);
}

/* Move bytes along flow i as far as they go without blocking, given what poll said of its two fds. */
static void pump(struct conn *c, int i, short from_events, short to_events) {
  struct flow *f = &c->flow[i];
  int fresh = 0;
  if (f->done) return;
  if (!f->eof && f->end < BUF_SIZE && (from_events & (POLLIN | POLLHUP | POLLERR))) {
    ssize_t n = recv(c->fd[i], f->buf + f->end, BUF_SIZE - f->end, 0);
    if (n > 0) f->end += (size_t)n, fresh = 1;
    else if (n == 0 || gone(errno)) f->eof = 1;
  }
  if (f->end > f->start && (fresh || (to_events & (POLLOUT | POLLHUP | POLLERR)))) {
    ssize_t n = send(c->fd[1 - i], f->buf + f->start, f->end - f->start, MSG_NOSIGNAL);
    if (n > 0) f->start += (size_t)n;
    else if (n < 0 && gone(errno)) {
      abandon(c, i);
      return;
    }
  } else if (to_events & (POLLHUP | POLLERR)) {
    abandon(c, i);
    return;
  }
  if (f->start == f->end) f->start = f->end = 0;
  if (f->eof && f->end == 0) {
    shutdown(c->fd[1 - i], SHUT_WR); /* a half-close passes through */
    f->done = 1;
  }
}

__attribute__((noreturn)) static void relay(int http, int socks, const char *dir) {
  static struct pollfd p[2 + 2 * MAX_CONNS];
  static struct conn *owner[2 + 2 * MAX_CONNS];
  for (;;) {
    int n = 0, timeout = -1;
    long long now = now_ms();
    if (n_conns < MAX_CONNS) {
      p[n++] = (struct pollfd){.fd = http, .events = POLLIN};
      p[n++] = (struct pollfd){.fd = socks, .events = POLLIN};
    }
    int listeners = n;
    for (int k = 0; k < MAX_CONNS; k++) {
      struct conn *c = &conns[k];
      if (!c->used) continue;
      if (c->tries > 0) {
        int wait = (int)(c->retry_at > now ? c->retry_at - now : 0);
        if (timeout < 0 || wait < timeout) timeout = wait;
        continue;
      }
      for (int i = 0; i < 2; i++) {
        short ev = 0;
        struct flow *in = &c->flow[i], *out = &c->flow[1 - i];
        if (!in->done && !in->eof && in->end < BUF_SIZE) ev |= POLLIN;
        if (!out->done && out->end > out->start) ev |= POLLOUT;
        owner[n] = c;
        /* An fd nothing is asked of is left out: its hang-up would wake poll again and again. */
        p[n++] = (struct pollfd){.fd = ev ? c->fd[i] : -1, .events = ev};
      }
    }
    if (poll(p, (nfds_t)n, timeout) < 0 && errno != EINTR) _exit(1);
    for (int k = 0; k < MAX_CONNS; k++) {
      struct conn *c = &conns[k];
      if (c->used && c->tries > 0 && c->retry_at <= now_ms() && try_connect(c) < 0) drop(c);
    }
    for (int j = listeners; j < n; j += 2) {
      struct conn *c = owner[j];
      if (!c->used) continue;
      short client = p[j].fd < 0 ? 0 : p[j].revents, proxy = p[j + 1].fd < 0 ? 0 : p[j + 1].revents;
      pump(c, 0, client, proxy);
      pump(c, 1, proxy, client);
      if (c->flow[0].done && c->flow[1].done) drop(c);
    }
    if (listeners) {
      if (p[0].revents & POLLIN) accept_from(http, dir, "http.sock");
      if (p[1].revents & POLLIN) accept_from(socks, dir, "socks.sock");
    }
  }
}

/* Close every fd from `lowest` up: close_range, or one by one where the kernel lacks it. */
static void close_from(int lowest) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, (unsigned)lowest, ~0U, 0) == 0) return;
#endif
  for (int fd = lowest; fd < 1024; fd++) close(fd);
}

int main(int argc, char **argv) {
  const char *dir = NULL, *v;
  int http_port = 0, socks_port = 0, i = 1;
  for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
    if ((v = prefixed(argv[i], "--dir="))) dir = v;
    else if ((v = prefixed(argv[i], "--http="))) http_port = port_of(v);
    else if ((v = prefixed(argv[i], "--socks="))) socks_port = port_of(v);
    else usage(argv[i]);
  }
  if (!dir || !http_port || !socks_port || i + 1 >= argc) usage("--dir, --http, --socks and a program are required");
  if (strlen(dir) + sizeof "/socks.sock" > sizeof ((struct sockaddr_un *)0)->sun_path) usage("--dir is too long");
  char **program = argv + i + 1;

  /* Nobody of the sandbox reads the token out of this process while it is here. */
  prctl(PR_SET_DUMPABLE, 0);
  read_token();
  int http = listen_on(http_port), socks = listen_on(socks_port);

  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0); /* the program is gone already */
    prctl(PR_SET_DUMPABLE, 0);
    signal(SIGPIPE, SIG_IGN);
    /* Hold none of the program's fds (its output pipes, the log channel): only the two listeners. */
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3; fd++) {
      if (devnull >= 0) dup2(devnull, fd);
      else close(fd);
    }
    if (dup2(http, 3) < 0 || dup2(socks, 4) < 0) _exit(1);
    close_from(5);
    relay(3, 4, dir);
  }
  /* The listeners are close-on-exec: the program gets neither them nor the token. */
  execvp(program[0], program);
  int code = errno == ENOENT ? 127 : 126;
  fprintf(stderr, "cordon-bridge: cannot run %s: %s\n", program[0], strerror(errno));
  return code;
}
