;; Never returns, never calls the host.
(module (func (export "run") (loop $forever (br $forever))))
