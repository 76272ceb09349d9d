import assert from 'node:assert/strict'
import { closeSync, openSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { preadSmall } from '../../src/host/pread.js'
import { tempDir } from '../helpers.js'

describe('preadSmall', () => {
  it('reads the whole file from offset 0 every time, so a changed file reads anew', () => {
    const file = path.join(tempDir('cordon-pread-'), 'f')
    writeFileSync(file, 'first')
    const fd = openSync(file, 'r')
    try {
      assert.equal(preadSmall(fd), 'first')
      assert.equal(preadSmall(fd), 'first', 'not continuing where the last read ended')
      writeFileSync(file, 'second')
      assert.equal(preadSmall(fd), 'second')
      writeFileSync(file, 'x'.repeat(5000))
      assert.equal(preadSmall(fd), undefined, 'a file larger than the buffer is not cut short')
    } finally {
      closeSync(fd)
    }
  })

  it('a kernel file is generated afresh: /proc/self/stat', () => {
    const fd = openSync('/proc/self/stat', 'r')
    try {
      assert.match(preadSmall(fd) ?? '', new RegExp(`^${process.pid} \\(`))
    } finally {
      closeSync(fd)
    }
    assert.equal(preadSmall(fd), undefined, 'a closed fd reads as nothing')
  })
})
