/*
 * cordon-guard.node: a Node addon the function runner (dist/functions/child.js) loads before it reads its
 * request or loads the operator's module. Loading it is the whole API: napi_register_module_v1 runs once.
 *
 * The runner holds a called function's reply channel (fd 8) and the nonce that authenticates the reply
 * (it came on fd 7). The function is trusted to return its own value; what it starts is not, and runs as
 * the same uid in the same sandbox. So before any of the function's code runs:
 *   - the process becomes non-dumpable: without CAP_SYS_PTRACE (the sandbox has none, in either tier) no
 *     other process may open its /proc/<pid>/mem, /environ, its fds, nor use pidfd_getfd, ptrace or
 *     process_vm_readv on it, which is how a subprocess read the nonce and reached fd 8;
 *   - fds 7 and 8 (CALL_FDS in src/plan/fd-layout.ts) become close-on-exec, so no program it starts inherits them;
 *   - SIGUSR1 no longer opens Node's inspector (on 127.0.0.1:9229, which every process of the sandbox can
 *     reach and through which it could run code in the runner): a handler that does nothing takes the place
 *     of Node's. Any process of the same uid may send SIGUSR1. exec resets a handler, so what the runner
 *     starts gets SIGUSR1's default as usual.
 * Each step is read back; on any failure loading throws, and the runner refuses to call the function.
 *
 * No Node headers: the one N-API function used is declared here (N-API is a stable C ABI, resolved against
 * the node binary at load).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

typedef struct napi_env__ *napi_env;
typedef struct napi_value__ *napi_value;
typedef int napi_status;
extern napi_status napi_throw_error(napi_env env, const char *code, const char *msg);

static const int CHANNEL_FDS[] = {7, 8};

static void ignore(int signo) { (void)signo; }

__attribute__((visibility("default"))) napi_value napi_register_module_v1(napi_env env, napi_value exports) {
  char why[200];
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) {
    snprintf(why, sizeof why, "cordon-guard: cannot make the function runner non-dumpable: %s", strerror(errno));
    napi_throw_error(env, "CORDON_GUARD", why);
    return NULL;
  }
  for (size_t i = 0; i < sizeof CHANNEL_FDS / sizeof CHANNEL_FDS[0]; i++) {
    int fd = CHANNEL_FDS[i];
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0 && fcntl(fd, F_SETFD, flags | FD_CLOEXEC) == 0) flags = fcntl(fd, F_GETFD);
    if (flags < 0 || !(flags & FD_CLOEXEC)) {
      snprintf(why, sizeof why, "cordon-guard: cannot make fd %d close-on-exec: %s", fd, strerror(errno));
      napi_throw_error(env, "CORDON_GUARD", why);
      return NULL;
    }
  }
  struct sigaction quiet = {.sa_handler = ignore, .sa_flags = SA_RESTART}, now;
  sigemptyset(&quiet.sa_mask);
  if (sigaction(SIGUSR1, &quiet, NULL) != 0 || sigaction(SIGUSR1, NULL, &now) != 0 || now.sa_handler != ignore) {
    snprintf(why, sizeof why, "cordon-guard: cannot keep SIGUSR1 from opening the inspector: %s", strerror(errno));
    napi_throw_error(env, "CORDON_GUARD", why);
    return NULL;
  }
  return exports;
}
