;; Floods the host: log lines, stdout, or timestamp reads, n times (n = -1: for ever).
(module
  (import "platform_sandbox" "log_message" (func $log (param i32 i32 i32)))
  (import "platform_sandbox" "get_timestamp" (func $ts (result i64)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 100) "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789")
  (func $times (param $n i32) (param $what i32)
    (local $i i32)
    (i32.store (i32.const 0) (i32.const 100))
    (i32.store (i32.const 4) (i32.const 100))
    (block $done
      (loop $next
        (br_if $done (i32.and (i32.ge_s (local.get $n) (i32.const 0)) (i32.ge_u (local.get $i) (local.get $n))))
        (if (i32.eq (local.get $what) (i32.const 0)) (then (call $log (i32.const 2) (i32.const 100) (i32.const 100))))
        (if (i32.eq (local.get $what) (i32.const 1))
          (then (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))
        (if (i32.eq (local.get $what) (i32.const 2)) (then (drop (call $ts))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next))))
  (func (export "logs") (param i32) (call $times (local.get 0) (i32.const 0)))
  (func (export "stdout") (param i32) (call $times (local.get 0) (i32.const 1)))
  (func (export "clock") (param i32) (call $times (local.get 0) (i32.const 2))))
