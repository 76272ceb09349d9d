// API keys: random, shown once, stored only as their sha256. (What POST /v1/keys takes: key-schema.ts;
// what ceilings mean: ceilings.ts.)
import { createHash, randomBytes } from 'node:crypto'

/** A new key: a recognisable prefix (secret scanners find leaked ones) and 256 random bits. */
export function newKey(): string {
  return `cordon_${randomBytes(32).toString('base64url')}`
}

/** What the store keeps of a key: its sha256, hex (a key has 256 bits: no salt or slow hash needed). */
export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex')
}
