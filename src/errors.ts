/** Invalid options: thrown by run()/start(), exit 125 from the CLI. `field` is the dotted option path. */
export class PolicyError extends Error {
  override readonly name = 'PolicyError'
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(field ? `${field}: ${message}` : message)
  }
}
