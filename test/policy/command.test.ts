import assert from 'node:assert/strict'
import { chmodSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { PolicyError } from '../../src/errors.js'
import { findProgram, resolveProgram, SAFE_PATH } from '../../src/host/programs.js'
import { checkCommand, resolveRules } from '../../src/policy/command.js'

const NONE = new Set<string>()
const MISSING = 'cordon-test-no-such-program-0xdeadbeef'

let dir: string
let LS: string
let RM: string
let CAT: string

before(() => {
  // realpath: on some hosts the temp dir itself is behind a symlink.
  dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'cordon-command-')))
  LS = realpathSync(findProgram('ls', SAFE_PATH, '/')!)
  RM = realpathSync(findProgram('rm', SAFE_PATH, '/')!)
  CAT = realpathSync(findProgram('cat', SAFE_PATH, '/')!)

  mkdirSync(path.join(dir, 'bin'))
  mkdirSync(path.join(dir, 'sub'))
  writeFileSync(path.join(dir, 'bin', 'tool'), '#!/bin/sh\n', { mode: 0o755 })
  writeFileSync(path.join(dir, 'sub', 'script'), '#!/bin/sh\n', { mode: 0o755 })
  writeFileSync(path.join(dir, 'bin', 'plain'), 'not executable\n', { mode: 0o644 })
  chmodSync(path.join(dir, 'bin', 'plain'), 0o644)
  mkdirSync(path.join(dir, 'bin', 'adir'))
  mkdirSync(path.join(dir, 'links'))
  symlinkSync(RM, path.join(dir, 'links', 'echo'))
  symlinkSync(path.join(dir, 'nowhere'), path.join(dir, 'links', 'dangling'))
})

after(() => {
  rmSync(dir, { recursive: true, force: true })
})

describe('findProgram', () => {
  it('finds a bare name on the PATH', () => {
    const found = findProgram('ls', SAFE_PATH, '/')
    assert.ok(found, 'found')
    assert.ok(path.isAbsolute(found), 'path.isAbsolute(found)')
    assert.equal(realpathSync(found), LS)
  })

  it('takes the first PATH entry that has the program', () => {
    const first = path.join(dir, 'links')
    assert.equal(findProgram('echo', `${first}:${SAFE_PATH}`, '/'), path.join(first, 'echo'))
  })

  it('skips PATH entries without the program and empty entries', () => {
    assert.equal(
      findProgram('tool', `/nonexistent::${dir}/sub:${dir}/bin`, '/'),
      path.join(dir, 'bin', 'tool'),
    )
  })

  it('resolves relative PATH entries against cwd', () => {
    assert.equal(findProgram('tool', 'bin', dir), path.join(dir, 'bin', 'tool'))
  })

  it('resolves a relative path against cwd without searching PATH', () => {
    assert.equal(findProgram('./tool', SAFE_PATH, path.join(dir, 'bin')), path.join(dir, 'bin', 'tool'))
    assert.equal(findProgram('sub/script', SAFE_PATH, dir), path.join(dir, 'sub', 'script'))
    assert.equal(
      findProgram('../sub/script', SAFE_PATH, path.join(dir, 'bin')),
      path.join(dir, 'sub', 'script'),
    )
    assert.equal(findProgram('sub/script', `${dir}`, '/'), null)
  })

  it('returns an absolute path as given, normalised', () => {
    assert.equal(findProgram('/usr/bin/../bin/ls', '', '/'), '/usr/bin/ls')
  })

  it('returns null when nothing is there', () => {
    assert.equal(findProgram(MISSING, SAFE_PATH, '/'), null)
    assert.equal(findProgram('ls', '', '/'), null)
    assert.equal(findProgram(`/usr/bin/${MISSING}`, SAFE_PATH, '/'), null)
  })

  it('ignores files that are not executable, directories and dangling links', () => {
    assert.equal(findProgram('plain', path.join(dir, 'bin'), '/'), null)
    assert.equal(findProgram('adir', path.join(dir, 'bin'), '/'), null)
    assert.equal(findProgram('dangling', path.join(dir, 'links'), '/'), null)
  })
})

describe('resolveProgram', () => {
  it('resolves `..` in a path', () => {
    assert.equal(resolveProgram('/usr/bin/../bin/ls', SAFE_PATH, '/'), LS)
  })

  it('resolves a symlink to what it runs', () => {
    assert.equal(resolveProgram('echo', path.join(dir, 'links'), '/'), RM)
    assert.equal(resolveProgram('./links/echo', SAFE_PATH, dir), RM)
  })

  it('returns null when nothing is there', () => {
    assert.equal(resolveProgram(MISSING, SAFE_PATH, '/'), null)
  })
})

describe('resolveRules', () => {
  it('resolves every entry to a real path', () => {
    const rules = resolveRules('allow', ['ls', '/usr/bin/../bin/cat', `${dir}/links/echo`], SAFE_PATH, '/')
    assert.deepEqual([...rules].sort(), [CAT, LS, RM].sort())
  })

  it('returns an empty set for no entries', () => {
    assert.equal(resolveRules('deny', [], SAFE_PATH, '/').size, 0)
  })

  it("throws a PolicyError naming 'allow.0' for a name that does not exist", () => {
    assert.throws(
      () => resolveRules('allow', [MISSING], SAFE_PATH, '/'),
      (error: unknown) => {
        assert.ok(error instanceof PolicyError, 'error instanceof PolicyError')
        assert.equal(error.field, 'allow.0')
        assert.ok(error.message.includes(MISSING), error.message)
        return true
      },
    )
  })

  it('names the index and the field of the bad entry', () => {
    assert.throws(
      () => resolveRules('deny', ['ls', 'rm', MISSING], SAFE_PATH, '/'),
      (error: unknown) => error instanceof PolicyError && error.field === 'deny.2',
    )
  })
})

describe('checkCommand', () => {
  it('allows anything found when allow and deny are empty, returning the path as found and its real path', () => {
    assert.deepEqual(checkCommand('ls', SAFE_PATH, '/', NONE, NONE), {
      ok: true,
      program: findProgram('ls', SAFE_PATH, '/'),
      real: LS,
    })
  })

  it('keeps the path as found (for argv[0]) beside the real path it judged (to execute)', () => {
    const searchPath = `${dir}/links:${SAFE_PATH}`
    assert.deepEqual(checkCommand('echo', searchPath, '/', NONE, NONE), {
      ok: true,
      program: path.join(dir, 'links', 'echo'),
      real: RM,
    })
  })

  it('finds a relative path against cwd', () => {
    assert.deepEqual(checkCommand('./tool', SAFE_PATH, path.join(dir, 'bin'), NONE, NONE), {
      ok: true,
      program: path.join(dir, 'bin', 'tool'),
      real: path.join(dir, 'bin', 'tool'),
    })
  })

  it('returns a real path with no symlink in it, in the directory that holds the program', () => {
    const linkedDir = path.join(dir, 'linked-bin')
    symlinkSync(path.join(dir, 'bin'), linkedDir)
    const check = checkCommand('tool', linkedDir, '/', NONE, NONE)
    assert.deepEqual(check, {
      ok: true,
      program: path.join(linkedDir, 'tool'),
      real: path.join(dir, 'bin', 'tool'),
    })
  })

  it('reports not-found with the program as the limit', () => {
    const check = checkCommand(MISSING, SAFE_PATH, '/', NONE, NONE)
    assert.deepEqual(check, {
      ok: false,
      kind: 'not-found',
      limit: MISSING,
      message: `${MISSING}: command not found`,
    })
  })

  it('a file that is there but not executable is denied (126), as a shell says "Permission denied"', () => {
    assert.deepEqual(checkCommand('./plain', SAFE_PATH, path.join(dir, 'bin'), NONE, NONE), {
      ok: false,
      kind: 'denied',
      limit: 'executable',
      message: './plain: Permission denied (not executable)',
    })
    // Found on the PATH with nothing executable of that name after it: the same, as bash.
    assert.deepEqual(checkCommand('plain', path.join(dir, 'bin'), '/', NONE, NONE), {
      ok: false,
      kind: 'denied',
      limit: 'executable',
      message: 'plain: Permission denied (not executable)',
    })
  })

  it('a directory named by a path is denied (126) "Is a directory"; on the PATH it is passed over', () => {
    assert.deepEqual(checkCommand(path.join(dir, 'bin'), SAFE_PATH, '/', NONE, NONE), {
      ok: false,
      kind: 'denied',
      limit: 'executable',
      message: `${path.join(dir, 'bin')}: Is a directory`,
    })
    const onPath = checkCommand('bin', dir, '/', NONE, NONE)
    assert.equal(onPath.ok === false ? onPath.kind : 'ok', 'not-found')
  })

  it('denies a symlink named echo that points to rm when deny has rm', () => {
    const searchPath = `${dir}/links:${SAFE_PATH}`
    const deny = resolveRules('deny', ['rm'], SAFE_PATH, '/')
    const check = checkCommand('echo', searchPath, '/', NONE, deny)
    assert.deepEqual(check, {
      ok: false,
      kind: 'denied',
      limit: 'deny',
      message: `${RM} is on the deny list`,
    })
  })

  it('denies `/usr/bin/../bin/ls` when deny has ls', () => {
    const deny = resolveRules('deny', ['ls'], SAFE_PATH, '/')
    const check = checkCommand('/usr/bin/../bin/ls', SAFE_PATH, '/', NONE, deny)
    assert.equal(check.ok === false && check.kind, 'denied')
  })

  it('lets through programs not on the deny list', () => {
    const deny = resolveRules('deny', ['rm'], SAFE_PATH, '/')
    assert.equal(checkCommand('ls', SAFE_PATH, '/', NONE, deny).ok, true)
  })

  it('with a non-empty allow list, allows what is on it however it is named', () => {
    const allow = resolveRules('allow', ['ls'], SAFE_PATH, '/')
    assert.equal(checkCommand('ls', SAFE_PATH, '/', allow, NONE).ok, true)
    assert.deepEqual(checkCommand('/usr/bin/../bin/ls', SAFE_PATH, '/', allow, NONE), {
      ok: true,
      program: '/usr/bin/ls',
      real: LS,
    })
  })

  it('with a non-empty allow list, denies everything else', () => {
    const allow = resolveRules('allow', ['ls'], SAFE_PATH, '/')
    assert.deepEqual(checkCommand('cat', SAFE_PATH, '/', allow, NONE), {
      ok: false,
      kind: 'denied',
      limit: 'allow',
      message: `${CAT} is not on the allow list`,
    })
  })

  it('judges a symlink against the allow list by its target', () => {
    const searchPath = `${dir}/links:${SAFE_PATH}`
    const allowEcho = new Set([realpathSync(findProgram('echo', SAFE_PATH, '/')!)])
    const check = checkCommand('echo', searchPath, '/', allowEcho, NONE)
    assert.equal(check.ok === false && check.limit, 'allow')
  })

  it('lets deny win over allow', () => {
    const rules = resolveRules('allow', ['ls'], SAFE_PATH, '/')
    const check = checkCommand('ls', SAFE_PATH, '/', rules, rules)
    assert.equal(check.ok === false && check.limit, 'deny')
  })

  it('reports not-found before consulting the rules', () => {
    const allow = resolveRules('allow', ['ls'], SAFE_PATH, '/')
    const check = checkCommand(MISSING, SAFE_PATH, '/', allow, allow)
    assert.equal(check.ok === false && check.kind, 'not-found')
  })
})
