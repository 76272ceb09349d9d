/** Invalid options: thrown by run()/start(), exit 125 from the CLI. `field` is the dotted option path. */
export class PolicyError extends Error {
  override readonly name = 'PolicyError'
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(field ? `${field}: ${reason}` : reason)
  }
}
