;; A WASI command as toolchains make them: looks for preopens (there are none), reads its args, prints a
;; line to stdout and one to stderr, exits 3.
(module
  (import "wasi_snapshot_preview1" "fd_prestat_get" (func $prestat (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get" (func $args_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 100) "hello\n")
  (data (i32.const 110) "to stderr\n")
  (func $write (param $fd i32) (param $ptr i32) (param $len i32)
    (i32.store (i32.const 0) (local.get $ptr))
    (i32.store (i32.const 4) (local.get $len))
    (drop (call $fd_write (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8))))
  (func (export "_start")
    ;; no preopens: EBADF (8) for fd 3
    (if (i32.ne (call $prestat (i32.const 3) (i32.const 200)) (i32.const 8)) (then unreachable))
    ;; no filesystem at all: ENOSYS (52)
    (if (i32.ne (call $path_open (i32.const 3) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)
                   (i64.const 0) (i64.const 0) (i32.const 0) (i32.const 0)) (i32.const 52)) (then unreachable))
    ;; argv: its count at 300, its buffer's size at 304, the pointers at 400, the strings at 1000;
    ;; argv[1] is written to stdout
    (drop (call $args_sizes (i32.const 300) (i32.const 304)))
    (drop (call $args_get (i32.const 400) (i32.const 1000)))
    (if (i32.ge_u (i32.load (i32.const 300)) (i32.const 2))
      (then (call $write (i32.const 1) (i32.load (i32.const 404))
              (i32.sub (i32.sub (i32.add (i32.const 1000) (i32.load (i32.const 304))) (i32.load (i32.const 404))) (i32.const 1)))))
    (call $write (i32.const 1) (i32.const 100) (i32.const 6))
    (call $write (i32.const 2) (i32.const 110) (i32.const 10))
    (call $exit (i32.const 3))
    unreachable))
