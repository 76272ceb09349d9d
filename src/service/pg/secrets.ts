// Keys' secrets (the env values injected into their runs, and the webhook signing secret) sealed with
// AES-256-GCM when the operator gives a secrets key: a shared database is read by more people than a
// data dir's owner (its admins, its backups, a replica), and these are the credentials of the keys'
// users. A row is `1 | nonce (12) | tag (16) | ciphertext`, a fresh random nonce per write, and the key's
// id is the additional data: a sealed value moved to another key's row does not open there.
//
// The store holds a check value sealed with the same key (cordon_settings 'secrets-check'), so that a
// node given the wrong key, or none for a store whose secrets are sealed, is refused at start instead of
// failing each key's authentication later.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'

const VERSION = 1
const NONCE = 12
const TAG = 16
const CHECK = 'cordon secrets check'

/** What a key's row holds sealed. */
export interface KeySecrets {
  secrets: Record<string, string>
  webhookSecret: string
}

/** The 32 bytes of an operator's key file (`head -c 32 /dev/urandom > FILE`), or an error naming it. */
export function readSecretsKey(file: string): Buffer {
  let bytes: Buffer
  try {
    bytes = readFileSync(file)
  } catch (error) {
    throw new Error(`cannot read the secrets key ${file}: ${(error as Error).message}`)
  }
  if (bytes.length !== 32) {
    bytes.fill(0)
    throw new Error(
      `the secrets key ${file} must hold exactly 32 bytes (it holds ${bytes.length}): make one with head -c 32 /dev/urandom`,
    )
  }
  return bytes
}

export class Sealer {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('a secrets key is 32 bytes (AES-256)')
  }

  seal(plain: Buffer, aad: string): Buffer {
    const nonce = randomBytes(NONCE)
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce)
    cipher.setAAD(Buffer.from(aad))
    const body = Buffer.concat([cipher.update(plain), cipher.final()])
    return Buffer.concat([Buffer.from([VERSION]), nonce, cipher.getAuthTag(), body])
  }

  /** The plaintext, or an error (never the bytes) when the row was not sealed by this key for `aad`. */
  open(sealed: Buffer, aad: string): Buffer {
    if (sealed.length < 1 + NONCE + TAG || sealed[0] !== VERSION)
      throw new Error('a sealed value of an unknown format')
    const decipher = createDecipheriv('aes-256-gcm', this.key, sealed.subarray(1, 1 + NONCE))
    decipher.setAAD(Buffer.from(aad))
    decipher.setAuthTag(sealed.subarray(1 + NONCE, 1 + NONCE + TAG))
    try {
      return Buffer.concat([decipher.update(sealed.subarray(1 + NONCE + TAG)), decipher.final()])
    } catch {
      throw new Error('a sealed value does not open with this secrets key (another key, or altered)')
    }
  }

  sealKey(id: string, value: KeySecrets): Buffer {
    return this.seal(Buffer.from(JSON.stringify(value)), `key:${id}`)
  }

  openKey(id: string, sealed: Buffer): KeySecrets {
    return JSON.parse(this.open(sealed, `key:${id}`).toString('utf8')) as KeySecrets
  }

  /** The value the store keeps to tell this key from another. */
  check(): Buffer {
    return this.seal(Buffer.from(CHECK), 'check')
  }

  /** Whether `sealed` is this key's check value. */
  verifies(sealed: Buffer): boolean {
    try {
      return this.open(sealed, 'check').toString() === CHECK
    } catch {
      return false
    }
  }
}
