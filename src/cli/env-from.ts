// `--env-from FILE`: variables for the sandbox from a file, so that a secret never has to be written into an
// argv (which every process of the host can read in /proc/<pid>/cmdline). A small, strict format: dotenv
// and node:util's parseEnv skip a line they cannot read without a word, and a secret file with a typo must
// fail, naming the file and the line, rather than start the sandbox without the secret.
// Not `--env-file`: Node (20 to at least 24) takes any argument starting with --env-file, even one after
// the script's path, as its own option (nodejs/node#54232): it exits 9 on a missing file before cordon
// runs, and applies the file's NODE_OPTIONS to cordon itself, where a `--require` would run code.
import { readFileSync } from 'node:fs'
import { PolicyError } from '../errors.js'

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * `NAME=VALUE` per line. Blank lines and lines whose first non-blank character is `#` are skipped;
 * leading blanks and an `export ` prefix are dropped (so the file can be sourced by a shell too); a
 * trailing CR is dropped (CRLF files). VALUE is the rest of the line, verbatim: no inline comments,
 * escapes or expansion. One pair of matching quotes ('…' or "…") around the whole value is removed, and
 * their content is taken verbatim too; an opening quote without its closing one is an error (a value is
 * one line). A later line for the same NAME wins.
 */
export function parseEnvFile(text: string, file: string): Record<string, string> {
  const env: Record<string, string> = {}
  // A UTF-8 byte order mark (some editors write one) is not part of the first name.
  text
    .replace(/^\uFEFF/, '')
    .split('\n')
    .forEach((raw, i) => {
      const fail = (why: string): never => {
        throw new PolicyError('env-from', `${file}:${i + 1}: ${why}`)
      }
      const line = (raw.endsWith('\r') ? raw.slice(0, -1) : raw).replace(/^[ \t]+/, '')
      if (line === '' || line.startsWith('#')) return
      if (line.includes('\0')) fail('contains a NUL byte')
      const assignment = line.replace(/^export[ \t]+/, '')
      const eq = assignment.indexOf('=')
      if (eq < 0) fail('is not NAME=VALUE')
      const name = assignment.slice(0, eq)
      // Not echoed: a line that is not an assignment may be a pasted secret (base64 has = in it).
      if (!NAME.test(name))
        fail('the text before = is not a variable name (letters, digits, _; no blanks around =)')
      if (name === '__proto__') fail('__proto__ cannot be carried (a JS object would drop it)')
      let value = assignment.slice(eq + 1)
      const quote = value[0]
      if (quote === '"' || quote === "'") {
        if (value.length < 2 || !value.endsWith(quote)) fail(`the value's ${quote} is not closed on its line`)
        value = value.slice(1, -1)
      }
      env[name] = value
    })
  return env
}

/** The files in order, a later one winning. */
export function readEnvFiles(files: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {}
  for (const file of files) {
    let text: string
    try {
      text = readFileSync(file, 'utf8')
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      const why =
        code === 'ENOENT'
          ? 'does not exist'
          : code === 'EISDIR'
            ? 'is a directory'
            : `is not readable (${code})`
      throw new PolicyError('env-from', `${file} ${why}`)
    }
    Object.assign(env, parseEnvFile(text, file))
  }
  return env
}
