// The one path walker: symlinks followed inside a root, as the kernel would.
import assert from 'node:assert/strict'
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { walkPath } from '../../src/host/walk.js'
import { tempDir } from '../helpers.js'

describe('walkPath', () => {
  const root = tempDir('cordon-walk-')
  mkdirSync(path.join(root, 'usr/bin'), { recursive: true })
  writeFileSync(path.join(root, 'usr/bin/tool'), '')
  symlinkSync('/usr/bin', path.join(root, 'bin')) // absolute: restarts at the root, not the host's /
  symlinkSync('../usr/bin/tool', path.join(root, 'usr/rel'))
  symlinkSync('loop', path.join(root, 'loop'))

  it('follows absolute links from the root and relative ones from where they are', () => {
    assert.deepEqual(walkPath(root, '/bin/tool'), { ok: true, path: '/usr/bin/tool' })
    assert.deepEqual(walkPath(root, '/usr/rel'), { ok: true, path: '/usr/bin/tool' })
    assert.deepEqual(walkPath(root, '/../../usr/./bin/tool'), { ok: true, path: '/usr/bin/tool' })
  })

  it('says where a path stops: missing, through a file, or round a loop', () => {
    assert.deepEqual(walkPath(root, '/usr/nope/x'), { ok: false, why: 'missing', at: '/usr/nope' })
    assert.deepEqual(walkPath(root, '/usr/bin/tool/x'), { ok: false, why: 'missing', at: '/usr/bin/tool' })
    assert.equal(walkPath(root, '/loop').ok, false)
    assert.equal((walkPath(root, '/loop') as { why: string }).why, 'loop')
  })

  it('shows each symlink to `inspect` before following it', () => {
    const seen: string[] = []
    walkPath(root, '/bin/tool', (at) => seen.push(at))
    assert.deepEqual(seen, ['/bin'])
  })
})
