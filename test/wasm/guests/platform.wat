;; The seed's ABI, every import behind a thin export, and the flows its guests use:
;; exec_show (one exec, the response logged as hex), retry (a short buffer, then the size it was told),
;; loop (n execs), clock (k timestamps logged). The request is at 1024, responses at 0x10000.
(module
  (import "platform_sandbox" "sandbox_exec" (func $exec (param i32 i32 i32 i32) (result i32)))
  (import "platform_sandbox" "get_timestamp" (func $ts (result i64)))
  (import "platform_sandbox" "log_message" (func $log (param i32 i32 i32)))
  (import "platform_sandbox" "sandbox_status" (func $status (result i32)))
  (memory (export "memory") 40)
  (data (i32.const 1024) "{{REQUEST}}")
  {{HEXLOG}}
  (func (export "exec") (param i32 i32 i32 i32) (result i32)
    (call $exec (local.get 0) (local.get 1) (local.get 2) (local.get 3)))
  (func (export "log") (param i32 i32 i32)
    (call $log (local.get 0) (local.get 1) (local.get 2)))
  (func (export "status") (result i32) (call $status))
  (func $exec_show (export "exec_show") (param $resp_len i32) (result i32)
    (local $n i32)
    (local.set $n (call $exec (i32.const 1024) (i32.const {{REQUEST_LEN}}) (i32.const 0x10000) (local.get $resp_len)))
    (if (i32.gt_s (local.get $n) (i32.const 0))
      (then (call $hexlog (i32.const 0x10000) (local.get $n))))
    (local.get $n))
  ;; An 8-byte buffer first, then exactly what the first answer said was needed: returns the second answer.
  (func (export "retry") (result i32)
    (local $first i32)
    (local.set $first (call $exec (i32.const 1024) (i32.const {{REQUEST_LEN}}) (i32.const 0x10000) (i32.const 8)))
    (if (i32.ge_s (local.get $first) (i32.const 0)) (then (return (i32.const 0x7fffffff))))
    (call $exec_show (i32.sub (i32.const 0) (local.get $first))))
  (func (export "loop") (param $n i32) (result i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (drop (call $exec_show (i32.const 0x100000)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $n))
  (func (export "clock") (param $k i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $k)))
        (i64.store (i32.const 0x180000) (call $ts))
        (call $hexlog (i32.const 0x180000) (i32.const 8))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next))))
)
