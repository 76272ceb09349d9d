/** Base of cordon's own errors. */
export class CordonError extends Error {
  override readonly name: string = 'CordonError'
}

/** Invalid options: thrown by run()/start(), exit 125 from the CLI. `field` is the dotted option path. */
export class PolicyError extends CordonError {
  override readonly name = 'PolicyError'
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(field ? `${field}: ${reason}` : reason)
  }
}
