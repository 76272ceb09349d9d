/*
 * cordon-launch: the launcher both tiers start through. One exec that sets up the sandbox and then becomes
 * the program (process tier) or bwrap (namespace tier, which gets only rlimits, the cgroup and the uid from
 * here), instead of a chain of util-linux tools (unshare → setpriv → prlimit), each an exec of its own.
 *
 *   cordon-launch --keep-fds=[N,...] [--cpu=S:H] [--fsize=N] [--core=N] [--data=N] [--nproc=N] [--nofile=N]
 *                 [--join=FILE]... [--unshare-net] [--unshare-ipc] [--mkdir=DIR [--own-tmpfs=N]] [--uid=N --gid=N]
 *                 [--mount-ns [--keep-fd=N:PATH]... [--empty=DIR]... [--tmpfs=DIR]... [--tmpfs-size=N] [--proc]
 *                  [--ro-bind-data=PATH:TEXT]...] [--memfd=N:TEXT]... [--stage-fd=N]...
 *                 [--landlock-fs [--landlock-write=PATH]... [--landlock-write-fd=N]...] [--scope-signals]
 *                 [--scope-abstract-unix] [--seccomp=HEX] [--bwrap-env] [--monitor [--kill-session]]
 *                 [--merge-stderr] [--cwd-fd=N] [--argv0=NAME] -- PROGRAM [ARGS...]
 *   cordon-launch --landlock-abi        prints the kernel's Landlock ABI version (0: none)
 *   cordon-launch --remove-tree=PATH    removes PATH, a directory of the caller's uid, and all beneath it,
 *                                       never following a symlink or leaving its filesystem (see remove_tree);
 *                                       a symlink or file of the caller's at PATH goes as what it is
 *   cordon-launch --remove-tree-any=PATH
 *                 the same, as root, of whatever owner (a run's pool uid), once nothing of its sandbox runs
 *   cordon-launch --exec ARGV0 FILE [ARGS...]
 *                 the sandbox's exec step, and nothing else: execute FILE with argv[0] ARGV0 (bwrap before
 *                 0.9 cannot set argv[0], and cordon executes a program's judged real path, not its name)
 *
 * The whole argv is parsed first (see parse), so what parse refuses is refused before anything is set up.
 * Then main() takes its steps in the order below.
 *
 * With --merge-stderr, first of all, stderr becomes the stdout pipe (2>&1): cordon then pipes only
 * one, and everything from here on (bwrap, the program) writes both streams into it in the order written.
 *
 * Then every inherited fd above stderr is closed but the --keep-fds ones (cordon's pipes): an fd its host
 * left without close-on-exec must not reach the sandbox; and --cwd-fd's directory is entered. With
 * --monitor (the process tier) it then forks: this process stays as the program's parent, outside the
 * sandbox (see monitor()), and the child goes on. Then, in this order: rlimits (prlimit's syntax, N or
 * SOFT:HARD, in the order given; only now, so the monitor is under none of them: a sandbox's CPU or file
 * limit is the program's, never that of what cleans up after it); join the sandbox's cgroup
 * (write 0 to each FILE: v1 `tasks`, v2 `cgroup.procs`), so that nothing of the program ever runs outside
 * it; an empty network namespace and an IPC namespace of its own (need root; SysV IPC objects then die
 * with the sandbox instead of outliving it on the host); with --mount-ns (root, the process tier) a mount
 * namespace of its own (see private_mounts); with --stage-fd (root, the namespace tier) one where the
 * judged paths bwrap binds are reachable by the sandbox uid (see stage_fds); the sandbox's private TMPDIR, made for uid/gid
 * (with --own-tmpfs, not as root, a tmpfs of N bytes in a user and mount namespace of its own: see own_tmpfs); drop to
 * uid/gid with no supplementary groups; no_new_privs; parent-death SIGKILL; Landlock (writes only beneath
 * the --landlock-write paths and the --landlock-write-fd fds, judged paths cordon opened and passed, each
 * closed once its rule is made; no signals to, and no abstract unix sockets of, processes outside the
 * sandbox); the seccomp program (struct sock_filter[] in hex: a few hundred bytes, and an argument
 * costs no pipe); exec. --ro-bind-data and --memfd give the sandbox files cordon wrote (its own /etc/passwd
 * and /etc/group): see bind_data and data_fd. With --bwrap-env PROGRAM is bwrap: the environment is the sandbox's, so it reaches
 * bwrap only as --clearenv/--setenv arguments (through --args and a memfd, never the visible argv) and bwrap
 * itself starts with an empty one: bwrap is dynamically linked and runs outside the namespaces it is about
 * to make, where an LD_PRELOAD or GCONV_PATH from the policy would run code.
 *
 * With --kill-session (the process tier without a uid or cgroup of its own, where the session is all that
 * marks the sandbox's processes) the monitor kills what is left of its session when the program ends, and
 * when the host dies: only while it lives, as the session's leader, is the session id sure to be this
 * sandbox's (once it is reaped, a stranger's setsid can make a session with the same id).
 *
 * The argv comes from cordon's own builder (src/plan/launcher.ts), never from a shell. Any failure before the
 * exec writes one line, "cordon-launch: ...", to fd 4 (the refusal pipe, which only cordon reads) and exits
 * 1, so cordon reports it as a launch error, not as the program's; an exec of the program that fails writes
 * there too, and exits 127 (not found) or 126, as a shell does. fd 4 is made close-on-exec before anything
 * else, so neither bwrap nor the program ever holds it (the monitor closes it too): nothing they print can
 * pass for the launcher's refusal. Run by hand without a kept fd 4, the launcher says it on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Landlock's ABI, defined here because distribution headers lag the kernels cordon runs on. */
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_WRITE_FILE (1ULL << 1)
#define LL_REMOVE_DIR (1ULL << 4)
#define LL_REMOVE_FILE (1ULL << 5)
#define LL_MAKE_CHAR (1ULL << 6)
#define LL_MAKE_DIR (1ULL << 7)
#define LL_MAKE_REG (1ULL << 8)
#define LL_MAKE_SOCK (1ULL << 9)
#define LL_MAKE_FIFO (1ULL << 10)
#define LL_MAKE_BLOCK (1ULL << 11)
#define LL_MAKE_SYM (1ULL << 12)
#define LL_REFER (1ULL << 13)    /* ABI 2 */
#define LL_TRUNCATE (1ULL << 14) /* ABI 3 */
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ULL << 1)        /* ABI 6 */

struct ll_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

struct ll_path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

#define MAX_WRITABLE 256
#define MAX_JOIN 8
/* cordon's pipes, and an fd per use of a judged path (up to 256 writable ones, besides the rest). */
#define MAX_KEEP 1024
#define MAX_FILTER_BYTES (4096 * sizeof(struct sock_filter))
#define MAX_MOUNTS 64
#define MAX_STAGE 256
/* The new mount API (Linux 5.2), defined here for the same reason as Landlock's. */
#ifndef SYS_open_tree
#define SYS_open_tree 428
#define SYS_move_mount 429
#endif
#define OPEN_TREE_CLONE_ 1
#define AT_RECURSIVE_ 0x8000
#define MOVE_MOUNT_F_EMPTY_PATH_ 0x4
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* The refusal pipe (see the header); stderr only when run by hand without it. */
#define REFUSAL_FD 4
static int refusal_fd = STDERR_FILENO;

static void die(const char *what, const char *detail) {
  if (detail)
    dprintf(refusal_fd, "cordon-launch: %s %s: %s\n", what, detail, strerror(errno));
  else
    dprintf(refusal_fd, "cordon-launch: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void usage(const char *arg) {
  dprintf(refusal_fd, "cordon-launch: bad argument: %s\n", arg);
  exit(1);
}

/* A whole decimal number that ends at `stop` (or the string's end); anything else is a caller bug. */
static rlim_t number_until(const char *s, char stop, const char *arg) {
  if (*s < '0' || *s > '9') usage(arg);
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || (*end != '\0' && *end != stop)) usage(arg);
  return (rlim_t)v;
}

static rlim_t number(const char *s, const char *arg) { return number_until(s, '\0', arg); }
/* An fd number cordon passes (above stderr, below any sane limit), ending at `stop` or the string's end. */
static int fd_number(const char *s, char stop, const char *arg) {
  rlim_t fd = number_until(s, stop, arg);
  if (fd < 3 || fd > 1 << 20) usage(arg);
  return (int)fd;
}

/* Whether `fd` is one of the --keep-fds, the only inherited fds still open after close_fds. */
static int kept_fd(int fd, const int *keep, int n_keep) {
  for (int k = 0; k < n_keep; k++)
    if (keep[k] == fd) return 1;
  return 0;
}

/* An rlimit as asked, in prlimit's syntax (N or SOFT:HARD): checked by parse, set by apply_rlimits. */
struct limit {
  int resource;
  struct rlimit value;
  const char *arg;
};

static struct limit rlimit_arg(int resource, const char *value, const char *arg) {
  struct limit l = {.resource = resource, .arg = arg};
  l.value.rlim_cur = number_until(value, ':', arg);
  const char *colon = strchr(value, ':');
  l.value.rlim_max = colon ? number(colon + 1, arg) : l.value.rlim_cur;
  if (l.value.rlim_cur > l.value.rlim_max) usage(arg);
  return l;
}

static int landlock_abi(void) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : (int)abi;
}

/* Allow writes beneath the file open at `fd` (a directory, or a file that takes only file rights). */
static void allow_writes(int ruleset, uint64_t access, int fd, const char *what) {
  struct stat st;
  if (fstat(fd, &st) != 0) die("landlock: cannot stat", what);
  struct ll_path_beneath_attr rule = {.allowed_access = access, .parent_fd = fd};
  /* A file (e.g. /dev/null) takes only the rights that apply to files. */
  if (!S_ISDIR(st.st_mode)) rule.allowed_access &= LL_WRITE_FILE | LL_TRUNCATE;
  if (syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &rule, 0) != 0)
    die("landlock: cannot allow writes beneath", what);
}

static void apply_landlock(int fs, const char *const *writable, int n_writable, const int *writable_fd,
                           int n_writable_fd, uint64_t scoped) {
  int abi = landlock_abi();
  if (abi < 1) die("landlock", "is not available");
  struct ll_ruleset_attr attr = {0};
  if (fs) {
    attr.handled_access_fs = LL_WRITE_FILE | LL_REMOVE_DIR | LL_REMOVE_FILE | LL_MAKE_CHAR | LL_MAKE_DIR |
                             LL_MAKE_REG | LL_MAKE_SOCK | LL_MAKE_FIFO | LL_MAKE_BLOCK | LL_MAKE_SYM;
    if (abi >= 2) attr.handled_access_fs |= LL_REFER;
    if (abi >= 3) attr.handled_access_fs |= LL_TRUNCATE;
  }
  if (scoped) {
    errno = EOPNOTSUPP;
    if (abi < 6) die("landlock scopes", "need Landlock ABI 6 (Linux 6.12)");
    attr.scoped = scoped;
  }
  int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (ruleset < 0) die("landlock", "ruleset");
  for (int i = 0; i < n_writable; i++) {
    int fd = open(writable[i], O_PATH | O_CLOEXEC);
    if (fd < 0) die("landlock: cannot open", writable[i]);
    allow_writes(ruleset, attr.handled_access_fs, fd, writable[i]);
    close(fd);
  }
  /* Judged paths, by the fd cordon judged them on: never looked up by name again. Closed here: the
     program must not inherit them. */
  for (int i = 0; i < n_writable_fd; i++) {
    char what[32];
    snprintf(what, sizeof what, "fd %d", writable_fd[i]);
    allow_writes(ruleset, attr.handled_access_fs, writable_fd[i], what);
    close(writable_fd[i]);
  }
  if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) die("landlock", "restrict_self");
  close(ruleset);
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* --seccomp's hex as the program it spells, decoded by parse; apply_seccomp loads it. */
static struct sock_fprog seccomp_program(const char *hex) {
  static unsigned char program[MAX_FILTER_BYTES];
  size_t len = 0;
  for (; hex[0] && hex[1]; hex += 2) {
    int hi = hex_digit(hex[0]), lo = hex_digit(hex[1]);
    if (hi < 0 || lo < 0 || len == sizeof program) usage("--seccomp (not lowercase hex, or too long)");
    program[len++] = (unsigned char)(hi << 4 | lo);
  }
  if (*hex || len == 0 || len % sizeof(struct sock_filter) != 0) usage("--seccomp (not whole instructions)");
  return (struct sock_fprog){.len = (unsigned short)(len / sizeof(struct sock_filter)),
                             .filter = (struct sock_filter *)program};
}

/* A thread writing 0 moves itself: on v1 that skips the lock whose RCU grace period a move by pid waits for. */
static void join_cgroup(const char *file) {
  int fd = open(file, O_WRONLY | O_CLOEXEC);
  if (fd < 0) die("cannot open", file);
  if (write(fd, "0", 1) != 1) die("cannot join the cgroup through", file);
  close(fd);
}

/* Close every fd from `lowest` up that is not in keep[] (ascending, all >= lowest): close_range over the
   gaps, or /proc/self/fd before 5.9. */
static void close_fds(unsigned int lowest, const int *keep, int n_keep) {
  unsigned int from = lowest;
  int ok = 1;
  for (int k = 0; k <= n_keep && ok; k++) {
    unsigned int to = k < n_keep ? (unsigned int)keep[k] : ~0U;
    if (to > from) ok = syscall(SYS_close_range, from, to - 1, 0) == 0;
    if (k < n_keep && (unsigned int)keep[k] + 1 > from) from = (unsigned int)keep[k] + 1;
  }
  if (ok) return;
  DIR *dir = opendir("/proc/self/fd");
  if (!dir) die("cannot list", "/proc/self/fd");
  int self = dirfd(dir);
  struct dirent *e;
  while ((e = readdir(dir))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int fd = atoi(e->d_name), kept = fd < (int)lowest || fd == self;
    for (int k = 0; k < n_keep; k++) kept |= fd == keep[k];
    if (!kept) close(fd);
  }
  closedir(dir);
}

/* Every directory above `path` ("/" included) is a real directory of root's that nobody else may write:
   so no one but root can rename, replace or plant a name on the way to it. */
static void require_root_only_parents(const char *path) {
  char prefix[PATH_MAX];
  size_t n = strlen(path);
  if (n >= sizeof prefix) usage(path);
  for (size_t i = 0; i < n; i++) {
    if (path[i] != '/') continue;
    memcpy(prefix, path, i ? i : 1);
    prefix[i ? i : 1] = '\0';
    struct stat st;
    if (lstat(prefix, &st) != 0) die("cannot look at", prefix);
    if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
      errno = EPERM;
      die("not a directory only root can write:", prefix);
    }
  }
}

/* A directory to mount on: made when missing (its parents are root's alone, see above), never a symlink. */
static void mount_point(const char *path) {
  require_root_only_parents(path);
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno != ENOENT || mkdir(path, 0755) != 0 || lstat(path, &st) != 0) die("cannot make", path);
  }
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    die("cannot mount on", path);
  }
}

/* The place where a kept path is bound again, inside a fresh tmpfs: walked from / by fd, following no
   symlink; what is missing is made (a directory, or an empty file for anything else). */
static void keep_point(const char *path, int is_dir) {
  int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  char part[NAME_MAX + 1];
  for (const char *p = path + 1; dir >= 0 && *p;) {
    size_t n = strcspn(p, "/");
    if (n == 0 || n > NAME_MAX) usage(path);
    memcpy(part, p, n);
    part[n] = '\0';
    p += n + (p[n] == '/');
    int last = *p == '\0', next;
    if (last && !is_dir) {
      next = openat(dir, part, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    } else {
      if (mkdirat(dir, part, 0755) != 0 && errno != EEXIST) die("cannot make", path);
      next = openat(dir, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    close(dir);
    dir = next;
  }
  if (dir < 0) die("cannot make", path);
  close(dir);
}

static int beneath(const char *path, const char *dir);

struct cover {
  const char *path;
  int empty; /* an empty read-only tmpfs of root's (else the sandbox's own, writable) */
};

/* A file cordon wrote, for the sandbox: --ro-bind-data's PATH (or --memfd's fd) and its TEXT. */
struct data {
  const char *path;
  int fd;
  const char *text;
};
#define MAX_DATA 8

/*
 * --ro-bind-data=PATH:TEXT (with --mount-ns, after private_mounts): a file holding TEXT over PATH, an
 * existing file beneath directories only root can write (/etc/passwd). Made root's, 0444, in `stage` (the
 * first --tmpfs cover: a tmpfs of this namespace's, which a bind can take a file from, unlike a memfd),
 * bound read-only, and its name removed before the sandbox runs: the read-only mount is the only way to it.
 */
static void bind_data(const char *stage, const struct data *d, int n) {
  char file[PATH_MAX];
  struct stat st;
  require_root_only_parents(d->path);
  if (lstat(d->path, &st) != 0) die("cannot look at", d->path);
  if (!S_ISREG(st.st_mode)) {
    errno = EINVAL;
    die("not a file to cover:", d->path);
  }
  snprintf(file, sizeof file, "%s/.cordon-data-%d", stage, n);
  int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
  if (fd < 0) die("cannot make", file);
  size_t len = strlen(d->text);
  if (write(fd, d->text, len) != (ssize_t)len) die("cannot write", file);
  close(fd);
  if (mount(file, d->path, NULL, MS_BIND, NULL) != 0) die("cannot bind data over", d->path);
  if (mount(NULL, d->path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
    die("cannot make read-only", d->path);
  if (unlink(file) != 0) die("cannot remove", file);
}

/* --memfd=N:TEXT: fd N is a memfd holding TEXT, read from its start (bwrap's --ro-bind-data N DEST copies it
   into the sandbox). Made once only the kept fds are open, none of which is N. */
static void data_fd(const struct data *d) {
  int fd = (int)syscall(SYS_memfd_create, "cordon-data", 0);
  if (fd < 0) die("memfd_create", "for --memfd");
  size_t len = strlen(d->text);
  if (write(fd, d->text, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) != 0) die("cannot fill", "a memfd");
  if (fd != d->fd) {
    if (dup2(fd, d->fd) != d->fd) die("dup2", "a memfd");
    close(fd);
  }
}

/* A judged path cordon passed as `fd`, shown again at `path` beneath a cover. */
struct keep {
  int fd;
  const char *path;
};

#define MAX_LIMITS 32

/* Everything the argv asks for, as parse found it: nothing is set up before parse has checked all of it. */
struct options {
  int keep[MAX_KEEP], n_keep; /* --keep-fds, ascending; -1 until given */
  int cwd_fd;                 /* -1: none */
  struct limit limits[MAX_LIMITS];
  int n_limits;
  const char *join[MAX_JOIN];
  int n_join;
  int unshare_net, unshare_ipc;
  int mount_ns, proc;
  struct cover covers[MAX_MOUNTS];
  int n_covers;
  struct keep keeps[MAX_MOUNTS];
  int n_keeps;
  rlim_t tmpfs_size;
  struct data files[MAX_DATA]; /* --ro-bind-data */
  int n_files;
  const char *stage; /* the first --tmpfs cover, where bind_data makes its files */
  int staged[MAX_STAGE];
  int n_stage;
  const char *scratch;
  rlim_t own_tmpfs; /* --own-tmpfs: the scratch's size; 0: a plain directory */
  long uid, gid;    /* -1: none */
  struct data memfds[MAX_DATA];
  int n_memfds;
  int landlock_fs;
  const char *writable[MAX_WRITABLE];
  int n_writable;
  int writable_fd[MAX_WRITABLE];
  int n_writable_fd;
  uint64_t scoped;
  const char *seccomp; /* the hex as given; NULL: none */
  struct sock_fprog filter;
  int bwrap_env, monitored, kill_session, merge_stderr;
  const char *argv0;
  char **program; /* PROGRAM [ARGS...], NULL-terminated (the rest of argv) */
  int n_program;
};

/* A detached copy of the mount tree at the judged fd (open_tree, as a bind would take it), close-on-exec;
   made in the namespace the fd was opened in. */
static int copy_tree(int fd, const char *what) {
  int copy = (int)syscall(SYS_open_tree, fd, "", OPEN_TREE_CLONE_ | O_CLOEXEC | AT_RECURSIVE_ | AT_EMPTY_PATH);
  if (copy < 0) die("cannot copy the mount of", what);
  return copy;
}

/* Attach a detached copy (copy_tree) at `at`, then turn it and everything under it private through its fd:
   a copy of a shared host mount, taken before the namespace turned private, is still a peer of the host's,
   and mounts would travel between the two (a change of propagation needs the mount attached first). */
static void attach(int copy, const char *at) {
  char self[64];
  if (syscall(SYS_move_mount, copy, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH_) != 0) die("cannot attach a copy at", at);
  snprintf(self, sizeof self, "/proc/self/fd/%d", copy);
  if (mount(NULL, self, NULL, MS_REC | MS_PRIVATE, NULL) != 0) die("cannot make private", at);
}

/* Where --stage-fd copies go, in the launcher's own mount namespace (see stage_fds). */
#define STAGE_DIR "/run/cordon"

/*
 * --stage-fd (root, the namespace tier): bwrap, which runs as the sandbox uid, binds a judged path by its fd
 * only through the path /proc/self/fd/N names, which it resolves with the sandbox uid's permissions: one
 * beneath a directory that uid cannot search (a clone under root's 0700 home) is out of its reach. So each
 * staged fd's mount tree is copied (open_tree, before the unshare, as it was judged: never looked up by
 * name), a mount namespace of the launcher's own is made (bwrap's is made inside it; nothing reaches the
 * host), a tmpfs of root's, mode 0711, covers STAGE_DIR (a root-only directory), each copy is attached
 * there under its number, and the copy's fd, which now names that place, takes fd N's number: bwrap finds
 * the very object judged, at a path the sandbox uid can reach, and its own check (the fd and the mount are
 * the same file) holds. Nothing else of the directories above becomes reachable; bwrapArgs covers
 * STAGE_DIR in the sandbox where the host's /run would show.
 */
static void stage_fds(const int *fds, int n) {
  int copies[MAX_STAGE];
  char name[64], what[32];
  for (int s = 0; s < n; s++) {
    snprintf(what, sizeof what, "fd %d", fds[s]);
    copies[s] = copy_tree(fds[s], what);
  }
  if (unshare(CLONE_NEWNS) != 0) die("unshare", "mount namespace");
  if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die("mount", "propagation private");
  mount_point(STAGE_DIR);
  if (mount("tmpfs", STAGE_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=65536,mode=0711") != 0)
    die("cannot mount a tmpfs on", STAGE_DIR);
  for (int s = 0; s < n; s++) {
    struct stat st;
    if (fstat(copies[s], &st) != 0) die("cannot stat the copy of fd", NULL);
    snprintf(name, sizeof name, STAGE_DIR "/%d", s);
    int made = S_ISDIR(st.st_mode) ? mkdir(name, 0700) : close(open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (made != 0) die("cannot make", name);
    attach(copies[s], name);
    /* The copy's fd now names the attached mount's root: it replaces the judged fd, without close-on-exec. */
    if (dup2(copies[s], fds[s]) < 0) die("dup2", name);
    close(copies[s]);
  }
  if (mount(NULL, STAGE_DIR, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
    die("cannot make read-only", STAGE_DIR);
}

/*
 * --mount-ns (root, the process tier): a mount namespace of the sandbox's own, so what it mounts is seen by
 * its processes alone and goes with the last of them (the monitor stays in the host's). Propagation turns
 * private first, so nothing reaches the host. Then:
 * - the --keep-fd paths (the policy's, at or under a cover below: judged paths cordon opened and passed as
 *   fd N) are copied (open_tree of the fd, before the unshare: a mount of another namespace cannot be
 *   copied) before anything covers them, so what is shown again is what was judged, and neither its name
 *   nor a directory above it the sandbox uid cannot search is looked up again;
 * - each cover in order (parents first): an --empty tmpfs of root's (/run without the network: host daemons'
 *   sockets; a directory the sandbox uid cannot search above a path the policy names) or a --tmpfs of the sandbox's own, mode 0700, of --tmpfs-size bytes (its TMPDIR, /dev/shm):
 *   RAM, charged to its memory cgroup, full is ENOSPC; nosuid and nodev. A mount point is made only
 *   beneath directories no one but root can write, and is never a symlink;
 * - the kept paths bound again where they were, then the empty ones turned read-only;
 * - --proc: a procfs of its own with hidepid=invisible: the sandbox uid sees its own processes only, not
 *   cordon's (whose argv may carry secrets), not other runs', not this launcher's. (Before Linux 5.8 the
 *   option was the whole pid namespace's, the host's /proc included: refused there, never fallen back.)
 * Last a working directory at or beneath a cover (or /proc) is entered again by name, or it would still be
 * the host's view of it (a cwd under /run would reach the covered host /run by ".."); any other stays as it
 * was, on a mount nothing covers.
 */
static void private_mounts(const struct cover *covers, int n_covers, const struct keep *keeps, int n_keeps,
                           int proc, rlim_t size, long uid, long gid) {
  char cwd[PATH_MAX], data[128];
  int kept[MAX_MOUNTS], kept_dir[MAX_MOUNTS], rechdir = 0;
  if (!getcwd(cwd, sizeof cwd)) die("getcwd", NULL);
  for (int c = 0; c < n_covers; c++) rechdir |= strcmp(cwd, covers[c].path) == 0 || beneath(cwd, covers[c].path);
  rechdir |= proc && (strcmp(cwd, "/proc") == 0 || beneath(cwd, "/proc"));
  for (int k = 0; k < n_keeps; k++) {
    /* A copy of its mount tree as it is now, before any cover: a kept cover itself (a writable /dev/shm)
       would otherwise bring the cover stacked on it along. */
    struct stat st;
    kept[k] = copy_tree(keeps[k].fd, keeps[k].path);
    if (fstat(kept[k], &st) != 0) die("cannot stat the copy of", keeps[k].path);
    kept_dir[k] = S_ISDIR(st.st_mode); /* anything else (a file, a socket) is bound onto an empty file */
    close(keeps[k].fd);
  }
  if (unshare(CLONE_NEWNS) != 0) die("unshare", "mount namespace");
  if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die("mount", "propagation private");
  for (int c = 0; c < n_covers; c++) {
    mount_point(covers[c].path);
    if (covers[c].empty)
      snprintf(data, sizeof data, "size=%llu,mode=0755", (unsigned long long)size);
    else
      snprintf(data, sizeof data, "size=%llu,mode=0700,uid=%ld,gid=%ld", (unsigned long long)size, uid, gid);
    unsigned long flags = MS_NOSUID | MS_NODEV | (covers[c].empty ? MS_NOEXEC : 0);
    if (mount("tmpfs", covers[c].path, "tmpfs", flags, data) != 0) die("cannot mount a tmpfs on", covers[c].path);
  }
  for (int k = 0; k < n_keeps; k++) {
    keep_point(keeps[k].path, kept_dir[k]);
    attach(kept[k], keeps[k].path);
    close(kept[k]);
  }
  for (int c = 0; c < n_covers; c++) {
    if (covers[c].empty &&
        mount(NULL, covers[c].path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              NULL) != 0)
      die("cannot make read-only", covers[c].path);
  }
  if (proc) {
    mount_point("/proc");
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible") != 0)
      die("cannot mount /proc with hidepid=invisible", "(needs Linux 5.8)");
  }
  if (rechdir && chdir(cwd) != 0) die("cannot enter the working directory again:", cwd);
}

/* SIGKILL whatever is listed in a cgroup file (v1 `tasks`, v2 `cgroup.procs`); 1 when it listed someone. */
static int kill_listed(const char *file) {
  FILE *f = fopen(file, "r");
  if (!f) return 0;
  int found = 0;
  long pid;
  while (fscanf(f, "%ld", &pid) == 1) {
    found = 1;
    kill((pid_t)pid, SIGKILL);
  }
  fclose(f);
  return found;
}

/*
 * --kill-session: SIGKILL every other living process of the session this process leads, in passes until
 * one finds none (a killed process forks no more). Sound only while this process lives: its pid is the
 * session's id, which no stranger's setsid can take while it (or any process of the session) is there.
 */
static void kill_session(void) {
  const struct timespec pause = {0, 1000000};
  pid_t self = getpid();
  for (int pass = 0; pass < 1000; pass++) {
    DIR *dir = opendir("/proc");
    if (!dir) return;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      char file[64], stat[512], state;
      long pid = atol(e->d_name), ppid, pgrp, session;
      snprintf(file, sizeof file, "/proc/%ld/stat", pid);
      int fd = open(file, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      ssize_t n = read(fd, stat, sizeof stat - 1);
      close(fd);
      if (n <= 0) continue;
      stat[n] = '\0';
      /* The command name (in parentheses) may hold anything; the fields after the last ')' do not. */
      const char *after = strrchr(stat, ')');
      if (!after || sscanf(after + 1, " %c %ld %ld %ld", &state, &ppid, &pgrp, &session) != 4) continue;
      if (session != self || pid == self || state == 'Z') continue;
      found = 1;
      kill((pid_t)pid, SIGKILL);
    }
    closedir(dir);
    if (!found) return;
    nanosleep(&pause, NULL);
  }
}

/* --remove-tree-any: root walks directories of any owner (its permission checks pass whatever the mode). */
static int remove_any;

/*
 * `name` in `dir`, opened for the walk when it is a real directory (opened O_NOFOLLOW, so never through a
 * symlink), on the walk's filesystem `dev` (NULL: the one it is on) and owned by the caller (any owner with
 * remove_any); made u+rwx first when its owner took that away (a sandbox's chmod 0 would leave it behind
 * otherwise), by the inode the fd holds, never by name. -1 when it may not be walked.
 */
static int open_owned_dir(int dir, const char *name, dev_t *dev) {
  int fd = openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), walk = -1;
  struct stat st;
  if (fd < 0) return -1;
  int own = 0;
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && (!*dev || st.st_dev == *dev) &&
      ((own = st.st_uid == geteuid()) || remove_any)) {
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    if (!own || (st.st_mode & S_IRWXU) == S_IRWXU || chmod(self, (st.st_mode & 07777) | S_IRWXU) == 0)
      walk = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    *dev = st.st_dev;
  } else {
    errno = EPERM;
  }
  close(fd);
  return walk;
}

/* Deeper than this, a directory is moved up to the top of the tree instead of entered: the walk holds one
   fd per level, and a tree may be deeper than any fd limit. */
#define REMOVE_DEPTH 48

static int remove_emptied(int dir, const char *name, int fd, dev_t dev, int top, int depth);

/*
 * Empty the directory `dir` (an fd, never a path), `depth` levels below `top`. Every step is relative to an
 * fd the walk opened itself with O_NOFOLLOW: a name swapped for a symlink mid-walk is unlinked as the
 * symlink it is, never followed; a directory on another filesystem (a mount point) or of another owner is
 * never entered. A directory renamed away while the walk holds it takes the walk along, but only one its
 * owner could rename, into a place that owner can write: nothing the walk reaches is out of that owner's
 * own reach. Returns how many entries it removed or moved (progress).
 */
static long empty_dir(int dir, dev_t dev, int top, int depth) {
  static unsigned long moved;
  long done = 0;
  int copy = dup(dir);
  DIR *d = copy < 0 ? NULL : fdopendir(copy);
  if (!d) {
    if (copy >= 0) close(copy);
    return 0;
  }
  rewinddir(d); /* the copy shares its offset with `dir`, which an earlier pass left at the end */
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *name = e->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISDIR(st.st_mode)) {
      done += unlinkat(dir, name, 0) == 0;
      continue;
    }
    if (st.st_dev != dev) continue;
    if (depth >= REMOVE_DEPTH) {
      char up[64];
      snprintf(up, sizeof up, ".cordon-deep-%ld-%lu", (long)getpid(), moved++);
      done += syscall(SYS_renameat2, dir, name, top, up, RENAME_NOREPLACE) == 0;
      continue;
    }
    dev_t same = dev;
    int sub = open_owned_dir(dir, name, &same);
    if (sub < 0) continue;
    done += remove_emptied(dir, name, sub, dev, top, depth + 1);
    close(sub);
  }
  closedir(d);
  return done;
}

/* Empty `fd` (`name` in `dir`), then remove it; again while something came back meanwhile and the last
   pass got on. 1 when it is gone. */
static int remove_emptied(int dir, const char *name, int fd, dev_t dev, int top, int depth) {
  for (;;) {
    long done = empty_dir(fd, dev, top, depth);
    if (unlinkat(dir, name, AT_REMOVEDIR) == 0) return 1;
    if ((errno != ENOTEMPTY && errno != EEXIST) || done == 0) return 0;
  }
}

/*
 * Remove `path` and everything beneath it, race-free against whoever else may write in it (the sandbox,
 * of the same uid when cordon is not root): its parent (cordon's own TMPDIR, followed if a symlink) is
 * opened as a directory and `path`'s last name beneath that fd with O_NOFOLLOW, and it must be a
 * directory of the caller's uid on the parent's filesystem; then empty_dir. A symlink or file of the
 * caller's there is unlinked itself. 0 when it is gone (or was never there), -1 with errno otherwise.
 */
static int remove_tree(const char *path) {
  char parent[PATH_MAX];
  const char *slash = strrchr(path, '/');
  if (path[0] != '/' || !slash || !slash[1] || strcmp(slash + 1, "..") == 0 || strcmp(slash + 1, ".") == 0 ||
      (size_t)(slash - path) >= sizeof parent) {
    errno = EINVAL;
    return -1;
  }
  const char *name = slash + 1;
  memcpy(parent, path, (size_t)(slash - path));
  parent[slash == path ? 1 : slash - path] = '\0';
  int up = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (up < 0) return errno == ENOENT ? 0 : -1;
  struct stat pst;
  int fd = -1, rc = -1;
  if (fstat(up, &pst) != 0) goto out;
  dev_t dev = pst.st_dev;
  fd = open_owned_dir(up, name, &dev);
  if (fd < 0 && errno == ENOTDIR) {
    /* The name is there but not as a directory (a sandbox swapped it for a symlink): the name goes, as
       what it is, when it is the caller's; nothing it points to is touched. */
    struct stat st;
    if (fstatat(up, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
        (remove_any || st.st_uid == geteuid()))
      rc = unlinkat(up, name, 0);
    else
      errno = EPERM;
    goto out;
  }
  if (fd < 0) {
    if (errno == ENOENT) rc = 0;
    goto out;
  }
  rc = remove_emptied(up, name, fd, dev, fd, 0) ? 0 : -1;
  if (rc != 0 && errno == ENOENT) rc = 0;
out:
  if (fd >= 0) close(fd);
  close(up);
  return rc;
}

/*
 * The host died (its death signal woke the monitor): end the whole sandbox, not only the program (which
 * dies with the monitor anyway), and remove what cordon would have removed at the end of the run.
 * - Its processes: with a cgroup, its members, which are exactly this run's; without one, everything the
 *   sandbox uid runs (from a child with that uid, where kill(-1) reaches exactly those). In passes until
 *   one finds nobody: a killed process forks no more. The uid only without a cgroup: the host's uid lease
 *   is already free, and a new run that took it must not be hit.
 * - Its private TMPDIR on the host (not as root: as root it is a tmpfs in the sandbox's own mount
 *   namespace, gone with it), removed by remove_tree as the sandbox's uid, so a path swapped under the
 *   walk could only reach what the sandbox may remove anyway.
 * - Its cgroup: each joined file's directory, once its last process has finished exiting.
 */
static void end_sandbox(long uid, long gid, const char *const *join, int n_join, const char *scratch) {
  const struct timespec pause = {0, 1000000};
  for (int j = 0; j < n_join; j++)
    for (int pass = 0; pass < 1000 && kill_listed(join[j]); pass++) nanosleep(&pause, NULL);
  pid_t helper = uid >= 0 ? fork() : 0;
  if (helper == 0) {
    int as_sandbox = uid < 0 || (setresgid((gid_t)gid, (gid_t)gid, (gid_t)gid) == 0 &&
                                 setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) == 0);
    if (as_sandbox && uid >= 0 && n_join == 0)
      for (int pass = 0; pass < 1000 && kill(-1, SIGKILL) == 0; pass++) nanosleep(&pause, NULL);
    if (as_sandbox && scratch) remove_tree(scratch);
    if (uid >= 0) _exit(0);
  } else if (helper > 0) {
    waitpid(helper, NULL, 0);
  }
  char dir[4096];
  for (int j = 0; j < n_join; j++) {
    const char *slash = strrchr(join[j], '/');
    size_t n = (size_t)(slash - join[j]);
    if (n == 0 || n >= sizeof dir) continue;
    memcpy(dir, join[j], n);
    dir[n] = '\0';
    for (int pass = 0; pass < 200 && rmdir(dir) != 0 && errno == EBUSY; pass++) nanosleep(&pause, NULL);
  }
}

/* Pass on how the program ended: its exit code, or its signal (a real-time one, which Node cannot name, as 128+N). */
static void pass_on(int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  int sig = WTERMSIG(status);
  if (sig < 32) {
    /* 1, not 0: a pipe core_pattern ignores any other limit (see rlimits.ts); raised again below. */
    const struct rlimit no_core = {1, 1};
    sigset_t one;
    setrlimit(RLIMIT_CORE, &no_core);
    signal(sig, SIG_DFL);
    sigemptyset(&one);
    sigaddset(&one, sig);
    raise(sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
  }
  _exit(128 + sig);
}

/*
 * --monitor (the process tier): fork; the child goes on to set up and run the program, and this process
 * stays, as root, outside the sandbox's uid and cgroup, where no sandbox process can signal it. It passes
 * on how the program ended and, if the host dies first, kills the whole sandbox: a parent-death signal
 * reaches only the one process that set it, so without a monitor a child that left the session would
 * outlive a host killed with SIGKILL. Returns in the child only.
 */
static void monitor(const struct options *o) {
  pid_t host = getppid(), self = getpid();
  sigset_t all, before;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &before);
  pid_t child = fork();
  if (child < 0) die("fork", "the program");
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &before, NULL);
    /* Set again after the uid change, which clears it. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die("pdeathsig", NULL);
    if (getppid() != self) _exit(1);
    return;
  }
  /* Hold nothing open: the pipes close when the sandbox is done with them, not when the monitor is. */
  close_fds(0, NULL, 0);
  prctl(PR_SET_PDEATHSIG, SIGHUP);
  for (;;) {
    if (getppid() != host) {
      end_sandbox(o->uid, o->gid, o->join, o->n_join, o->scratch);
      if (o->kill_session) kill_session();
      kill(0, SIGKILL); /* the process group, the monitor last */
      _exit(1);
    }
    siginfo_t info;
    /* Every signal is blocked and waited for here: SIGCHLD, the death signal, and cordon's SIGTERM of a
       graceful stop, which is the program's to receive (cordon sends it there too), not the monitor's. */
    if (sigwaitinfo(&all, &info) != SIGCHLD) continue;
    int status;
    for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
      if (pid != child) continue;
      if (o->kill_session) kill_session();
      pass_on(status);
    }
  }
}

static void put(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0) die("cannot write", "the environment for bwrap");
    s += w;
    n -= (size_t)w;
  }
}

/* bwrap's --args content: --clearenv, then --setenv NAME VALUE for each variable, NUL-separated. */
static int env_as_bwrap_args(char **env) {
  int fd = (int)syscall(SYS_memfd_create, "cordon-env", 0);
  if (fd < 0) die("memfd_create", "for the environment");
  put(fd, "--clearenv", sizeof "--clearenv");
  for (char **e = env; *e; e++) {
    const char *eq = strchr(*e, '=');
    if (!eq) continue;
    put(fd, "--setenv", sizeof "--setenv");
    put(fd, *e, (size_t)(eq - *e));
    put(fd, "", 1);
    put(fd, eq + 1, strlen(eq + 1) + 1);
  }
  if (lseek(fd, 0, SEEK_SET) != 0) die("lseek", "the environment for bwrap");
  return fd;
}

static const char *prefixed(const char *arg, const char *prefix) {
  size_t n = strlen(prefix);
  return strncmp(arg, prefix, n) == 0 ? arg + n : NULL;
}

/* `path` is beneath `dir` (not `dir` itself). */
static int beneath(const char *path, const char *dir) {
  size_t n = strlen(dir);
  return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* --exec ARGV0 FILE [ARGS...]: inside the sandbox, as the sandbox, with its environment; nothing to set up. */
static int exec_step(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "cordon: the exec step needs ARGV0 and FILE\n");
    return 126;
  }
  const char *file = argv[3];
  argv[3] = argv[2];
  execv(file, argv + 3);
  int err = errno;
  fprintf(stderr, "cordon: cannot execute %s: %s\n", file, strerror(err));
  return err == ENOENT ? 127 : 126;
}

static void add_limit(struct options *o, int resource, const char *value, const char *arg) {
  if (o->n_limits == MAX_LIMITS) usage(arg);
  o->limits[o->n_limits++] = rlimit_arg(resource, value, arg);
}

/*
 * The argv, taken whole or refused (usage: exit 1 with "bad argument: ..."): nothing but where a refusal
 * is written changes until every argument is known good, so a bad one never leaves half a set-up behind.
 */
static void parse(int argc, char **argv, struct options *o) {
  o->n_keep = -1;
  o->cwd_fd = -1;
  o->uid = o->gid = -1;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i], *v;
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if ((v = prefixed(a, "--keep-fds="))) {
      /* Ascending, so the gaps between them are the ranges to close. */
      for (o->n_keep = 0; *v; o->n_keep++) {
        if (o->n_keep == MAX_KEEP) usage(a);
        int fd = fd_number(v, ',', a);
        if (o->n_keep > 0 && fd <= o->keep[o->n_keep - 1]) usage(a);
        o->keep[o->n_keep] = fd;
        const char *comma = strchr(v, ',');
        v = comma ? comma + 1 : v + strlen(v);
      }
    } else if ((v = prefixed(a, "--cpu="))) add_limit(o, RLIMIT_CPU, v, a);
    else if ((v = prefixed(a, "--fsize="))) add_limit(o, RLIMIT_FSIZE, v, a);
    else if ((v = prefixed(a, "--core="))) add_limit(o, RLIMIT_CORE, v, a);
    else if ((v = prefixed(a, "--data="))) add_limit(o, RLIMIT_DATA, v, a);
    else if ((v = prefixed(a, "--nproc="))) add_limit(o, RLIMIT_NPROC, v, a);
    else if ((v = prefixed(a, "--nofile="))) add_limit(o, RLIMIT_NOFILE, v, a);
    else if ((v = prefixed(a, "--uid="))) o->uid = (long)number(v, a);
    else if ((v = prefixed(a, "--gid="))) o->gid = (long)number(v, a);
    else if ((v = prefixed(a, "--seccomp="))) o->seccomp = v;
    else if ((v = prefixed(a, "--join="))) {
      if (o->n_join == MAX_JOIN || *v != '/') usage(a);
      o->join[o->n_join++] = v;
    } else if ((v = prefixed(a, "--mkdir="))) {
      if (*v != '/') usage(a);
      o->scratch = v;
    } else if ((v = prefixed(a, "--landlock-write="))) {
      if (o->n_writable == MAX_WRITABLE || *v != '/') usage(a);
      o->writable[o->n_writable++] = v;
    } else if ((v = prefixed(a, "--tmpfs=")) || (v = prefixed(a, "--empty="))) {
      if (o->n_covers == MAX_MOUNTS || *v != '/' || strcmp(v, "/") == 0) usage(a);
      o->covers[o->n_covers++] = (struct cover){v, a[2] == 'e'};
    } else if ((v = prefixed(a, "--keep-fd="))) {
      const char *colon = strchr(v, ':');
      if (o->n_keeps == MAX_MOUNTS || !colon || colon[1] != '/') usage(a);
      o->keeps[o->n_keeps++] = (struct keep){fd_number(v, ':', a), colon + 1};
    } else if ((v = prefixed(a, "--stage-fd="))) {
      if (o->n_stage == MAX_STAGE) usage(a);
      o->staged[o->n_stage++] = fd_number(v, '\0', a);
    } else if ((v = prefixed(a, "--tmpfs-size="))) o->tmpfs_size = number(v, a);
    else if ((v = prefixed(a, "--own-tmpfs="))) o->own_tmpfs = number(v, a);
    else if (strcmp(a, "--mount-ns") == 0) o->mount_ns = 1;
    else if (strcmp(a, "--proc") == 0) o->proc = 1;
    else if ((v = prefixed(a, "--ro-bind-data="))) {
      char *colon = strchr(argv[i], ':');
      if (o->n_files == MAX_DATA || *v != '/' || !colon) usage(a);
      *colon = '\0'; /* PATH ends there, TEXT follows */
      o->files[o->n_files++] = (struct data){v, -1, colon + 1};
    } else if ((v = prefixed(a, "--memfd="))) {
      const char *colon = strchr(v, ':');
      if (o->n_memfds == MAX_DATA || !colon) usage(a);
      o->memfds[o->n_memfds++] = (struct data){NULL, fd_number(v, ':', a), colon + 1};
    } else if ((v = prefixed(a, "--landlock-write-fd="))) {
      if (o->n_writable_fd == MAX_WRITABLE) usage(a);
      o->writable_fd[o->n_writable_fd++] = fd_number(v, '\0', a);
    } else if ((v = prefixed(a, "--argv0="))) o->argv0 = v;
    else if ((v = prefixed(a, "--cwd-fd="))) o->cwd_fd = fd_number(v, '\0', a);
    else if (strcmp(a, "--landlock-fs") == 0) o->landlock_fs = 1;
    else if (strcmp(a, "--scope-signals") == 0) o->scoped |= LL_SCOPE_SIGNAL;
    else if (strcmp(a, "--scope-abstract-unix") == 0) o->scoped |= LL_SCOPE_ABSTRACT_UNIX;
    else if (strcmp(a, "--unshare-net") == 0) o->unshare_net = 1;
    else if (strcmp(a, "--unshare-ipc") == 0) o->unshare_ipc = 1;
    else if (strcmp(a, "--bwrap-env") == 0) o->bwrap_env = 1;
    else if (strcmp(a, "--monitor") == 0) o->monitored = 1;
    else if (strcmp(a, "--kill-session") == 0) o->kill_session = 1;
    else if (strcmp(a, "--merge-stderr") == 0) o->merge_stderr = 1;
    else usage(a);
  }
  if (i >= argc) usage("(no program after --)");
  o->program = argv + i;
  o->n_program = argc - i;
  if ((o->uid < 0) != (o->gid < 0)) usage("--uid and --gid go together");
  if ((o->n_writable > 0 || o->n_writable_fd > 0) && !o->landlock_fs) usage("--landlock-write needs --landlock-fs");
  if (o->n_keep < 0) usage("--keep-fds is required (empty for none)");
  if (o->kill_session && !o->monitored) usage("--kill-session needs --monitor");
  /* An fd 4 cordon did not pipe is not the refusal pipe: it is closed below, and something else may reuse it. */
  if (!kept_fd(REFUSAL_FD, o->keep, o->n_keep)) refusal_fd = STDERR_FILENO;
  if ((o->n_covers || o->n_keeps || o->proc) && !o->mount_ns)
    usage("--tmpfs, --empty, --keep-fd and --proc need --mount-ns");
  if (o->n_stage && (o->mount_ns || o->uid < 0)) usage("--stage-fd needs --uid, and no --mount-ns");
  if (o->own_tmpfs && (!o->scratch || o->mount_ns || o->uid >= 0 || o->n_stage))
    usage("--own-tmpfs needs --mkdir, and no --mount-ns, --uid or --stage-fd");
  if (o->n_covers && (o->uid < 0 || o->tmpfs_size == 0)) usage("--tmpfs and --empty need --uid and --tmpfs-size");
  for (int k = 0; k < o->n_keeps; k++) {
    int covered = 0;
    for (int c = 0; c < o->n_covers; c++)
      covered |= strcmp(o->keeps[k].path, o->covers[c].path) == 0 || beneath(o->keeps[k].path, o->covers[c].path);
    if (!covered) usage("--keep-fd (a path beneath no --tmpfs or --empty)");
  }
  for (int c = 0; c < o->n_covers && !o->stage; c++)
    if (!o->covers[c].empty) o->stage = o->covers[c].path;
  if (o->n_files && !o->stage) usage("--ro-bind-data needs --mount-ns and a --tmpfs");
  for (int m = 0; m < o->n_memfds; m++)
    if (kept_fd(o->memfds[m].fd, o->keep, o->n_keep)) usage("--memfd (an fd that is kept)");
  if (o->cwd_fd >= 0 && !kept_fd(o->cwd_fd, o->keep, o->n_keep)) usage("--cwd-fd (an fd it did not keep)");
  if (o->seccomp) o->filter = seccomp_program(o->seccomp);
}

/* The steps, in the order main takes them (see the header). Each refuses through die(). */

static void apply_rlimits(const struct options *o) {
  for (int l = 0; l < o->n_limits; l++)
    if (setrlimit(o->limits[l].resource, &o->limits[l].value) != 0) die("setrlimit", o->limits[l].arg);
}

static void merge_stderr(const struct options *o) {
  if (o->merge_stderr && dup2(STDOUT_FILENO, STDERR_FILENO) != STDERR_FILENO) die("dup2", "stdout to stderr");
}

static void close_inherited_fds(const struct options *o) {
  close_fds(3, o->keep, o->n_keep); /* inherited ones above stderr */
}

/* The working directory cordon judged, entered by its fd: by name (the cwd the launcher was started in) a
   concurrent sandbox that can write above it could have swapped it since it was judged. */
static void enter_cwd(const struct options *o) {
  if (o->cwd_fd < 0) return;
  if (fchdir(o->cwd_fd) != 0) die("cannot enter the working directory", NULL);
  close(o->cwd_fd);
}

static void join_cgroups(const struct options *o) {
  for (int j = 0; j < o->n_join; j++) join_cgroup(o->join[j]);
}

static void unshare_namespaces(const struct options *o) {
  if (o->unshare_net && unshare(CLONE_NEWNET) != 0) die("unshare", "network namespace");
  if (o->unshare_ipc && unshare(CLONE_NEWIPC) != 0) die("unshare", "IPC namespace");
}

/* --mount-ns (the process tier) or --stage-fd (the namespace tier): never both (parse refuses it). */
static void mount_namespace(const struct options *o) {
  if (o->mount_ns)
    private_mounts(o->covers, o->n_covers, o->keeps, o->n_keeps, o->proc, o->tmpfs_size, o->uid, o->gid);
  for (int f = 0; f < o->n_files; f++) bind_data(o->stage, &o->files[f], f);
  if (o->n_stage) stage_fds(o->staged, o->n_stage);
}

/* A fresh name under the host's TMPDIR: mkdir refuses one that exists, so nothing is followed. */
static void make_scratch(const struct options *o) {
  if (!o->scratch) return;
  if (mkdir(o->scratch, 0700) != 0) die("cannot make", o->scratch);
  if (o->uid >= 0 && chown(o->scratch, (uid_t)o->uid, (gid_t)o->gid) != 0) die("cannot hand over", o->scratch);
}

/* Write `text` to a /proc file of this process's, whole. */
static void write_proc(const char *file, const char *text) {
  int fd = open(file, O_WRONLY | O_CLOEXEC);
  size_t n = strlen(text);
  if (fd < 0 || write(fd, text, n) != (ssize_t)n) die("cannot write", file);
  close(fd);
}

/*
 * --own-tmpfs (the process tier, not as root): its TMPDIR, a directory on the host's disk otherwise, and
 * /dev/shm (the host's, shared and unbounded) become tmpfs of N bytes, in a user namespace of its own
 * (the calling user's uid and gid mapped to themselves, nothing else: the program is who it was) and a
 * mount namespace it owns, where an unprivileged process may mount a tmpfs. Mounts of a namespace owned
 * by a less privileged user namespace never propagate back; private all the same. The directory made on
 * the host stays empty, and the tmpfs goes with the namespace, when the sandbox's last process does.
 * Capabilities in the new user namespace end at the exec: the program's uid is not 0 in it.
 */
static void own_tmpfs(const struct options *o) {
  if (!o->own_tmpfs) return;
  char map[64], data[96];
  uid_t uid = getuid();
  gid_t gid = getgid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) die("unshare", "user and mount namespace (for a bounded TMPDIR)");
  /* An unprivileged process maps a gid only once setgroups is denied to it. */
  write_proc("/proc/self/setgroups", "deny");
  snprintf(map, sizeof map, "%lu %lu 1\n", (unsigned long)uid, (unsigned long)uid);
  write_proc("/proc/self/uid_map", map);
  snprintf(map, sizeof map, "%lu %lu 1\n", (unsigned long)gid, (unsigned long)gid);
  write_proc("/proc/self/gid_map", map);
  if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die("mount", "propagation private");
  snprintf(data, sizeof data, "size=%llu,mode=0700", (unsigned long long)o->own_tmpfs);
  if (mount("tmpfs", o->scratch, "tmpfs", MS_NOSUID | MS_NODEV, data) != 0) die("cannot mount a tmpfs on", o->scratch);
  struct stat st;
  if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) {
    snprintf(data, sizeof data, "size=%llu,mode=1777", (unsigned long long)o->own_tmpfs);
    if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, data) != 0) die("cannot mount a tmpfs on", "/dev/shm");
  }
}

static void drop_privileges(const struct options *o) {
  if (o->gid < 0) return;
  if (setgroups(0, NULL) != 0) die("setgroups", NULL);
  if (setresgid((gid_t)o->gid, (gid_t)o->gid, (gid_t)o->gid) != 0) die("setresgid", NULL);
  if (setresuid((uid_t)o->uid, (uid_t)o->uid, (uid_t)o->uid) != 0) die("setresuid", NULL);
  /* Every run has a uid of its own and the pool's one gid: what a run writes stays writable by the group,
     so the next run given the same writable directory (another uid) may change it ("install, then run").
     Only sandboxes have that gid, and each sees only the paths its own policy names. */
  umask(umask(0) & ~(mode_t)S_IWGRP);
}

static void no_new_privs(void) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("no_new_privs", NULL);
}

/* Set after the uid change (which clears it); a parent already gone means cordon died meanwhile, and the
   launcher quietly ends (exit 1) instead of running the program orphaned. */
static void parent_death_signal(pid_t parent) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die("pdeathsig", NULL);
  if (getppid() != parent) exit(1);
}

static void make_memfds(const struct options *o) {
  for (int m = 0; m < o->n_memfds; m++) data_fd(&o->memfds[m]);
}

static void landlock(const struct options *o) {
  if (o->landlock_fs || o->scoped)
    apply_landlock(o->landlock_fs, o->writable, o->n_writable, o->writable_fd, o->n_writable_fd, o->scoped);
}

static void apply_seccomp(const struct options *o) {
  if (o->seccomp && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &o->filter) != 0) die("seccomp", "filter");
}

/* Become the program (or bwrap); returns only when the exec failed, with the exit code a shell would give. */
static int exec_program(const struct options *o) {
  char **program = o->program;
  if (o->bwrap_env) {
    char fd_text[16], *empty[] = {NULL}, **args = calloc((size_t)o->n_program + 3, sizeof *args);
    if (!args) die("calloc", NULL);
    snprintf(fd_text, sizeof fd_text, "%d", env_as_bwrap_args(environ));
    args[0] = program[0];
    args[1] = "--args";
    args[2] = fd_text;
    memcpy(args + 3, program + 1, (size_t)(o->n_program - 1) * sizeof *args);
    execve(args[0], args, empty);
  } else {
    /* program[0] is the judged real path; argv[0] may be the name it was found by (a venv's bin/python). */
    const char *file = program[0];
    if (o->argv0) program[0] = (char *)o->argv0;
    execv(file, program);
    program[0] = (char *)file;
  }
  int failed = errno;
  dprintf(refusal_fd, "cordon-launch: cannot execute %s: %s\n", program[0], strerror(failed));
  return failed == ENOENT ? 127 : 126;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--exec") == 0) return exec_step(argc, argv);
  /* Before anything else: an exec (of bwrap or the program) must never pass the refusal pipe on. */
  if (fcntl(REFUSAL_FD, F_SETFD, FD_CLOEXEC) == 0) refusal_fd = REFUSAL_FD;
  pid_t parent = getppid();
  if (argc == 2 && strcmp(argv[1], "--landlock-abi") == 0) {
    printf("%d\n", landlock_abi());
    return 0;
  }
  if (argc == 2 && strncmp(argv[1], "--remove-tree=", 14) == 0) {
    if (remove_tree(argv[1] + 14) == 0) return 0;
    fprintf(stderr, "cordon-launch: cannot remove %s: %s\n", argv[1] + 14, strerror(errno));
    return 1;
  }
  /*
   * remove_any: as root, a tree a run's sandbox (another uid) wrote, once nothing of it runs. The walk is
   * remove_tree's (by fd, no symlink followed, never off its filesystem); what a live sandbox could still
   * rename under it would only be what that sandbox may remove itself. A path-based remover cannot even
   * name a directory nested past PATH_MAX, which a sandbox makes with mkdir and chdir.
   */
  if (argc == 2 && strncmp(argv[1], "--remove-tree-any=", 18) == 0) {
    if (geteuid() != 0) {
      fprintf(stderr, "cordon-launch: --remove-tree-any is for root only\n");
      return 1;
    }
    remove_any = 1;
    if (remove_tree(argv[1] + 18) == 0) return 0;
    fprintf(stderr, "cordon-launch: cannot remove %s: %s\n", argv[1] + 18, strerror(errno));
    return 1;
  }
  static struct options o;
  parse(argc, argv, &o);
  merge_stderr(&o);
  close_inherited_fds(&o);
  enter_cwd(&o);
  if (o.monitored) {
    monitor(&o);
    parent = getppid();
  }
  /* In the child only (the program's side); before the uid drop, which RLIMIT_NPROC must already bound. */
  apply_rlimits(&o);
  join_cgroups(&o);
  unshare_namespaces(&o);
  mount_namespace(&o);
  make_scratch(&o);
  own_tmpfs(&o);
  drop_privileges(&o);
  no_new_privs();
  parent_death_signal(parent);
  make_memfds(&o);
  landlock(&o);
  apply_seccomp(&o);
  return exec_program(&o);
}
