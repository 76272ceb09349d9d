;; Grows its memory a page at a time, touching each, until memory.grow fails; then traps (as Rust's
;; allocator aborts).
(module
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (local $pages i32)
    (block $full
      (loop $more
        (br_if $full (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
        (local.set $pages (i32.add (local.get $pages) (i32.const 1)))
        (i32.store (i32.mul (local.get $pages) (i32.const 65536)) (local.get $pages))
        (br $more)))
    unreachable))
