/*
 * cordon-await: the last step of a warm member (a namespace-tier sandbox made ahead of its run, see
 * src/run/warm.ts). bwrap runs it, bound read-only by fd at /dev/.cordon-exec, as the program of a sandbox
 * already inside its namespaces, mounts, uid, cgroup and seccomp filter:
 *
 *   cordon-await        (no arguments; its environment is empty, its fds are those below)
 *
 * fd 8 (READY) gets one byte once it runs, and is closed: the member is ready. Then it blocks reading one
 * activation record from fd 7 (ACTIVATION) to its end (the host writes it and closes its end), closes fd 7,
 * and becomes the run's program: rlimits lowered, the umask set, stdin /dev/null when the run has none,
 * then one execve of the program's judged real path with the run's argv and environment. Nothing of the run
 * exists in the member before that record, and nothing of the member's own set-up is the program's: the
 * program is executed fresh, never forked from a prepared image. Both fds are close-on-exec from its first
 * instruction, so the program never holds them, whatever happens.
 *
 * The record: NUL-terminated fields,
 *   cordon-activation-1 UMASK(octal) STDIN(null|pipe) NLIMITS LIMIT... FILE ARGC ARG... ENVC ENV...
 * where each LIMIT is the launcher's rlimit argument (--cpu=S:H, --fsize=N, --core=N, --data=N,
 * --nproc=N, --nofile=N) and FILE is executed with ARG... (ARG 0 is argv[0], the name the program was
 * found by). A malformed record, or none (the host gave the member up), ends it with exit 1 and nothing run.
 * A failed exec says so on stderr and exits 127 (not found) or 126, as cordon's exec step and a shell do.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define ACTIVATION_FD 7
#define READY_FD 8
/* More than exec takes (6 MiB of arguments and environment), as the spawner's bound. */
#define MAX_RECORD (8 << 20)
#define MAX_LIMITS 16

static char *record;
static size_t used, fields_at;

/* The next NUL-terminated field of the record, or NULL past its end. */
static const char *field(void) {
  if (fields_at >= used) return NULL;
  const char *f = record + fields_at;
  size_t n = strnlen(f, used - fields_at);
  if (fields_at + n >= used) return NULL; /* not terminated */
  fields_at += n + 1;
  return f;
}

/* A whole decimal number within [0, max], or -1. */
static long count(const char *s, long max) {
  if (!s || *s < '0' || *s > '9') return -1;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  return errno || *end || v > max ? -1 : v;
}

static int rlimit_value(const char *s, char stop, rlim_t *out, const char **rest) {
  if (*s < '0' || *s > '9') return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || (*end != '\0' && *end != stop)) return -1;
  *out = (rlim_t)v;
  *rest = end;
  return 0;
}

/* One of the launcher's rlimit arguments (N or SOFT:HARD), applied; -1 when it is not one. */
static int apply_limit(const char *arg) {
  static const struct {
    const char *prefix;
    int resource;
  } names[] = {{"--cpu=", RLIMIT_CPU},   {"--fsize=", RLIMIT_FSIZE}, {"--core=", RLIMIT_CORE},
               {"--data=", RLIMIT_DATA}, {"--nproc=", RLIMIT_NPROC}, {"--nofile=", RLIMIT_NOFILE}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    size_t n = strlen(names[i].prefix);
    if (strncmp(arg, names[i].prefix, n) != 0) continue;
    struct rlimit l;
    const char *rest;
    if (rlimit_value(arg + n, ':', &l.rlim_cur, &rest) != 0) return -1;
    l.rlim_max = l.rlim_cur;
    if (*rest == ':' && rlimit_value(rest + 1, '\0', &l.rlim_max, &rest) != 0) return -1;
    if (*rest || l.rlim_cur > l.rlim_max) return -1;
    if (setrlimit(names[i].resource, &l) != 0) {
      fprintf(stderr, "cordon: setrlimit %s: %s\n", arg, strerror(errno));
      exit(1);
    }
    return 0;
  }
  return -1;
}

static void malformed(void) {
  fprintf(stderr, "cordon: a malformed activation record\n");
  exit(1);
}

int main(void) {
  /* First: the program must never hold the member's own fds, even when something below fails. */
  fcntl(ACTIVATION_FD, F_SETFD, FD_CLOEXEC);
  fcntl(READY_FD, F_SETFD, FD_CLOEXEC);
  if (write(READY_FD, "r", 1) != 1) return 1;
  close(READY_FD);

  size_t cap = 65536;
  record = malloc(cap);
  if (!record) return 1;
  for (;;) {
    if (used == cap) {
      if (cap >= MAX_RECORD) malformed();
      cap *= 2;
      char *grown = realloc(record, cap);
      if (!grown) return 1;
      record = grown;
    }
    ssize_t n = read(ACTIVATION_FD, record + used, cap - used);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    used += (size_t)n;
  }
  close(ACTIVATION_FD);
  if (used == 0) return 1; /* given up: nothing to run */

  const char *tag = field();
  if (!tag || strcmp(tag, "cordon-activation-1") != 0) malformed();
  const char *mask = field(), *in = field();
  long n_limits = count(field(), MAX_LIMITS);
  if (!mask || !in || n_limits < 0) malformed();
  for (long i = 0; i < n_limits; i++) {
    const char *arg = field();
    if (!arg || apply_limit(arg) != 0) malformed();
  }
  const char *file = field();
  long argc = count(field(), 1 << 20);
  if (!file || file[0] != '/' || argc < 1) malformed();
  char **argv = calloc((size_t)argc + 1, sizeof *argv);
  if (!argv) return 1;
  for (long i = 0; i < argc; i++)
    if (!(argv[i] = (char *)field())) malformed();
  long envc = count(field(), 1 << 20);
  if (envc < 0) malformed();
  char **envp = calloc((size_t)envc + 1, sizeof *envp);
  if (!envp) return 1;
  for (long i = 0; i < envc; i++)
    if (!(envp[i] = (char *)field())) malformed();
  if (fields_at != used) malformed();

  char *end;
  long m = strtol(mask, &end, 8);
  if (*end || m < 0 || m > 0777) malformed();
  umask((mode_t)m);
  if (strcmp(in, "null") == 0) {
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) != 0) {
      fprintf(stderr, "cordon: cannot open /dev/null: %s\n", strerror(errno));
      return 1;
    }
    close(null);
  } else if (strcmp(in, "pipe") != 0) {
    malformed();
  }
  execve(file, argv, envp);
  int err = errno;
  fprintf(stderr, "cordon: cannot execute %s: %s\n", file, strerror(err));
  return err == ENOENT ? 127 : 126;
}
