;; Recurses without end.
(module
  (func $deep (export "run") (param i32) (result i32)
    (i32.add (call $deep (i32.add (local.get 0) (i32.const 1))) (i32.const 1))))
