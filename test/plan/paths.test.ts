import assert from 'node:assert/strict'
import {
  closeSync,
  fstatSync,
  lchownSync,
  mkdirSync,
  readlinkSync,
  realpathSync,
  renameSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { PolicyError } from '../../src/errors.js'
import { FIRST_PATH_FD } from '../../src/plan/fd-layout.js'
import {
  blockedDirs,
  hiddenPaths,
  PathFds,
  refusePlantedIntoHidden,
  resolvePath,
  searchableBy,
  secretsOf,
  writableVia,
} from '../../src/plan/paths.js'
import { asUnprivileged, notRoot, noUnprivileged, tempDir } from '../helpers.js'

const policyError = (field: string, pattern: RegExp) => (e: unknown) =>
  e instanceof PolicyError && e.field === field && pattern.test(e.message)

const isOpen = (fd: number) => {
  try {
    fstatSync(fd)
    return true
  } catch {
    return false
  }
}

describe('resolvePath', () => {
  const base = realpathSync(tempDir('cordon-paths-'))
  mkdirSync(path.join(base, 'a', 'b'), { recursive: true })
  writeFileSync(path.join(base, 'a', 'file'), '')
  symlinkSync(path.join(base, 'a'), path.join(base, 'abs'))
  symlinkSync('a/b', path.join(base, 'rel'))
  symlinkSync('../../a', path.join(base, 'a', 'b', 'up'))
  symlinkSync('loop', path.join(base, 'loop'))

  it('gives a path with no symlink in it: absolute and relative links, dots, .. after a link', () => {
    assert.equal(resolvePath('f', path.join(base, 'abs', 'b')), path.join(base, 'a', 'b'))
    assert.equal(resolvePath('f', path.join(base, 'rel')), path.join(base, 'a', 'b'))
    assert.equal(resolvePath('f', `${base}/./a/../a/b/`), path.join(base, 'a', 'b'))
    // `..` after a symlink goes up from where the link led, as the kernel resolves it.
    assert.equal(resolvePath('f', `${base}/rel/../file`), path.join(base, 'a', 'file'))
    assert.equal(resolvePath('f', path.join(base, 'a', 'b', 'up', 'file')), path.join(base, 'a', 'file'))
    assert.equal(resolvePath('f', '/'), '/')
  })

  it('refuses what does not exist, a file used as a directory, and symlink loops, naming the field', () => {
    assert.throws(
      () => resolvePath('writable.2', path.join(base, 'nope')),
      policyError('writable.2', /does not exist/),
    )
    assert.throws(
      () => resolvePath('cwd', path.join(base, 'a', 'file', 'x')),
      policyError('cwd', /does not exist/),
    )
    assert.throws(() => resolvePath('cwd', path.join(base, 'loop')), policyError('cwd', /symlink loop/))
  })

  it('refuses a path cordon cannot search, naming the field, not with a bare EACCES', {
    skip: notRoot || noUnprivileged(),
  }, async () => {
    const closed = realpathSync(tempDir('cordon-closed-', { mode: 0o700 }))
    const out = await asUnprivileged<{ name: string; field: string; message: string }>(`
      const { PolicyError } = await import(${JSON.stringify(new URL('../../dist/index.js', import.meta.url).href)})
      try { await run(['true'], { cwd: '/', writable: [${JSON.stringify(`${closed}/x`)}] }) } catch (e) {
        return { name: e.name, field: e.field, message: e.message }
      }`)
    assert.equal(out.name, 'PolicyError')
    assert.equal(out.field, 'writable.0')
    assert.match(out.message, /cannot be reached .*EACCES/)
  })

  it('refuses a symlink another uid owns, anywhere on the way (a sandbox may have planted it)', {
    skip: notRoot,
  }, () => {
    const dir = realpathSync(tempDir('cordon-planted-', { mode: 0o777 }))
    mkdirSync(path.join(dir, 'real'))
    symlinkSync(path.join(dir, 'real'), path.join(dir, 'planted'))
    lchownSync(path.join(dir, 'planted'), 60123, 60000)
    // Reached through a link root owns, which is followed: the planted one is still found.
    symlinkSync(path.join(dir, 'planted'), path.join(dir, 'roots'))
    for (const p of [path.join(dir, 'planted'), path.join(dir, 'roots', 'x')]) {
      assert.throws(
        () => resolvePath('writable.0', p),
        policyError('writable.0', /symlink owned by uid 60123/),
      )
    }
    assert.equal(resolvePath('cwd', path.join(dir, 'real')), path.join(dir, 'real'))
  })
})

describe('refusePlantedIntoHidden', () => {
  const named = (path: string, planted: string[] = ['/w/proj/out']) => ({
    field: 'writable.0',
    path,
    planted,
  })
  const dir = (path: string) => ({ path, dir: true })
  const refused = policyError(
    'writable.0',
    /reached through \/w\/proj\/out, a symlink .* beneath \/home\/u\/\.ssh, which is hidden/,
  )

  it("refuses a path a link of cordon's uid carries beneath a hidden path no shown path reveals", () => {
    // cordon started from its home: the home shown, its dot-entries hidden all the same.
    const hide = [dir('/home/u'), dir('/home/u/.ssh')]
    assert.throws(
      () => refusePlantedIntoHidden([named('/home/u/.ssh')], hide, ['/home/u/proj', '/home/u/.ssh']),
      refused,
    )
    assert.throws(() => refusePlantedIntoHidden([named('/home/u/.ssh/id')], hide, ['/home/u']), refused)
    assert.throws(
      () => refusePlantedIntoHidden([named('/home/u/other')], hide, ['/home/u/proj']),
      policyError('writable.0', /beneath \/home\/u, which is hidden/),
    )
  })

  it('lets through a path named without such a link, or one shown anyway, or one nothing hides', () => {
    const hide = [dir('/home/u'), dir('/home/u/.ssh')]
    refusePlantedIntoHidden([named('/home/u/.ssh', [])], hide, ['/home/u/.ssh'])
    refusePlantedIntoHidden([named('/home/u/proj/build')], hide, ['/home/u/proj'])
    refusePlantedIntoHidden([named('/srv/data')], hide, [])
  })
})

describe('PathFds', () => {
  it('opens a judged path O_PATH at exactly that path, and judges it on the fd', () => {
    const dir = realpathSync(tempDir('cordon-fds-'))
    writeFileSync(path.join(dir, 'f'), 'x')
    const fds = new PathFds()
    const opened = fds.open('writable.0', dir, { dir: true })
    assert.equal(readlinkSync(`/proc/self/fd/${opened.fd}`), dir)
    assert.ok(opened.stat.isDirectory())
    assert.equal(fds.open('writable.1', dir), opened, 'a path opened once')
    assert.throws(
      () => fds.open('cwd', path.join(dir, 'f'), { dir: true }),
      policyError('cwd', /not a directory/),
    )
    fds.close()
    assert.equal(isOpen(opened.fd), false)
  })

  it('refuses a path whose component was swapped for a symlink after it was resolved', () => {
    const base = realpathSync(tempDir('cordon-swap-'))
    mkdirSync(path.join(base, 'sw', 'data'), { recursive: true })
    mkdirSync(path.join(base, 'elsewhere', 'data'), { recursive: true })
    const judged = resolvePath('writable.0', path.join(base, 'sw', 'data'))
    // What a concurrent sandbox does between the resolving and the open.
    renameSync(path.join(base, 'sw'), path.join(base, 'moved'))
    symlinkSync(path.join(base, 'elsewhere'), path.join(base, 'sw'))
    const fds = new PathFds()
    assert.throws(
      () => fds.open('writable.0', judged),
      policyError('writable.0', /changed while it was checked/),
    )
    fds.close()
  })

  it('refuses a path whose last component became a symlink, or vanished', () => {
    const base = realpathSync(tempDir('cordon-swap-'))
    mkdirSync(path.join(base, 'data'))
    const judged = resolvePath('cwd', path.join(base, 'data'))
    renameSync(judged, path.join(base, 'moved'))
    const fds = new PathFds()
    assert.throws(() => fds.open('cwd', judged), policyError('cwd', /changed while it was checked/))
    symlinkSync(path.join(base, 'moved'), judged)
    assert.throws(() => fds.open('cwd', judged), policyError('cwd', /changed while it was checked/))
    fds.close()
  })

  it('gives each use its own sandbox fd from FIRST_PATH_FD, and closes what no use was made of', () => {
    const a = realpathSync(tempDir('cordon-fds-a-'))
    const b = realpathSync(tempDir('cordon-fds-b-'))
    const fds = new PathFds()
    const fa = fds.open('writable.0', a).fd
    const fb = fds.open('cwd', b).fd
    assert.equal(fds.pass(a), FIRST_PATH_FD)
    assert.equal(fds.pass(a), FIRST_PATH_FD + 1)
    assert.deepEqual(fds.passed, [
      { child: FIRST_PATH_FD, host: fa, path: a },
      { child: FIRST_PATH_FD + 1, host: fa, path: a },
    ])
    assert.throws(() => fds.pass('/not/opened'), /was not judged/)
    fds.closeUnpassed()
    assert.equal(isOpen(fb), false, 'the unused one is closed')
    assert.equal(isOpen(fa), true, 'the passed one stays until the sandbox has started')
    fds.close()
    fds.close() // a second close closes nothing (its numbers may be someone else's by now)
    assert.equal(isOpen(fa), false)
  })

  it('closes the fd of a path it refuses', () => {
    const file = path.join(realpathSync(tempDir('cordon-fds-')), 'f')
    writeFileSync(file, '')
    const fds = new PathFds()
    // The next fd number is the one a refused open would leak.
    const probe = fds.open('readable.0', file).fd
    fds.close()
    const again = new PathFds()
    assert.throws(() => again.open('cwd', file, { dir: true }))
    const next = new PathFds().open('readable.0', file)
    assert.equal(next.fd, probe, 'no fd left open by the refusal')
    closeSync(next.fd)
  })
})

describe('secretsOf', () => {
  const home = realpathSync(tempDir('cordon-home-', { mode: 0o755 }))
  mkdirSync(path.join(home, '.ssh'))
  mkdirSync(path.join(home, 'project'))
  writeFileSync(path.join(home, '.netrc'), 'machine x password y')
  writeFileSync(path.join(home, 'notes.txt'), '')
  symlinkSync('/etc', path.join(home, '.etc-link'))

  it("lists a shown hidden directory's top-level dot-entries (not its symlinks), and nothing else", () => {
    const hide = hiddenPaths([home, '/does/not/exist'])
    assert.deepEqual(hide, [{ path: home, dir: true }])
    const secrets = secretsOf(hide, [home]).sort((x, y) => x.path.localeCompare(y.path))
    assert.deepEqual(secrets, [
      { path: path.join(home, '.netrc'), dir: false },
      { path: path.join(home, '.ssh'), dir: true },
    ])
    assert.deepEqual(
      secretsOf(hide, ['/elsewhere', path.join(home, 'project')]),
      [],
      'not shown: hidden whole',
    )
    assert.deepEqual(
      secretsOf(hide, [home], () => false),
      [],
      'out of reach already',
    )
  })

  it("hides what a dot-entry symlink leads to inside that directory (a dotfile manager's ~/.ssh), never its own home or outside", () => {
    const dotted = realpathSync(tempDir('cordon-home-', { mode: 0o755 }))
    mkdirSync(path.join(dotted, 'dotfiles', 'gnupg'), { recursive: true })
    writeFileSync(path.join(dotted, 'dotfiles', 'token'), 'secret')
    symlinkSync('dotfiles/gnupg', path.join(dotted, '.gnupg'))
    symlinkSync(path.join(dotted, 'dotfiles', 'token'), path.join(dotted, '.token'))
    symlinkSync('.', path.join(dotted, '.self'))
    symlinkSync('/etc', path.join(dotted, '.etc-link'))
    symlinkSync('dotfiles/missing', path.join(dotted, '.gone'))
    const secrets = secretsOf(hiddenPaths([dotted]), [dotted]).sort((x, y) => x.path.localeCompare(y.path))
    assert.deepEqual(secrets, [
      { path: path.join(dotted, 'dotfiles', 'gnupg'), dir: true },
      { path: path.join(dotted, 'dotfiles', 'token'), dir: false },
    ])
  })

  it('refuses a dot-entry symlink into a directory the sandbox can write, unless its target is hidden by name', () => {
    // A run could remove or repoint the link (no mount pins a symlink): the next run would hide nothing.
    const home = realpathSync(tempDir('cordon-home-', { mode: 0o755 }))
    mkdirSync(path.join(home, 'dotfiles', 'ssh'), { recursive: true })
    mkdirSync(path.join(home, '.local', 'gnupg'), { recursive: true })
    symlinkSync('dotfiles/ssh', path.join(home, '.ssh'))
    const hide = hiddenPaths([home])
    const via = (dir: string) => (dir === home ? 'writable.1' : null)
    assert.throws(
      () => secretsOf(hide, [home], () => true, via),
      policyError('writable.1', /\.ssh is a symlink to .*dotfiles\/ssh.*add .* to hide/),
    )
    // Read-only, as before: its target is hidden.
    assert.deepEqual(
      secretsOf(
        hide,
        [home],
        () => true,
        () => null,
      )
        .map((x) => x.path)
        .sort(),
      [path.join(home, '.local'), path.join(home, 'dotfiles', 'ssh')],
    )
    // Listed in hide, or inside a dot-entry that is no link: hidden by a name of its own, which stays put.
    const listed = hiddenPaths([home, path.join(home, 'dotfiles', 'ssh')])
    assert.equal(secretsOf(listed, [home], () => true, via).length, 2)
    symlinkSync('.local/gnupg', path.join(home, '.gnupg'))
    assert.equal(secretsOf(listed, [home], () => true, via).length, 3)
  })

  it('writableVia: the deepest bind at or above a directory decides, a writable one winning a tie', () => {
    assert.equal(writableVia('/h/me', ['/x', '/h/me'], []), 'writable.1')
    assert.equal(writableVia('/h/me', ['/h'], []), 'writable.0')
    assert.equal(writableVia('/h/me', ['/h/me/proj'], []), null)
    assert.equal(writableVia('/h/me', ['/h'], ['/h/me']), null)
    assert.equal(writableVia('/h/me', ['/h/me'], ['/h/me', '/h']), 'writable.0')
    assert.equal(writableVia('/h/me', ['/'], ['/h']), null)
  })

  it('searchableBy: search permission on the directory and every one above it', { skip: notRoot }, () => {
    const closed = realpathSync(tempDir('cordon-closed-', { mode: 0o700 }))
    mkdirSync(path.join(closed, 'open'), { mode: 0o755 })
    assert.equal(searchableBy(home, 60123, 60000), true)
    assert.equal(searchableBy(path.join(closed, 'open'), 60123, 60000), false)
    assert.equal(searchableBy(path.join(closed, 'open'), 0, 0), true)
  })
})

describe('blockedDirs', () => {
  const closed =
    (...dirs: string[]) =>
    (dir: string) =>
      !dirs.includes(dir)

  it('the first directory down each path that cannot be searched where the host shows it', () => {
    assert.deepEqual(blockedDirs(['/root/a/b/c'], ['/'], [], closed('/root', '/root/a')), ['/root'])
    assert.deepEqual(blockedDirs(['/srv/p'], ['/'], [], closed()), [])
  })

  it('none beneath a cover; again beneath a shown path inside it', () => {
    const searchable = closed('/run/u', '/run/k/deep')
    assert.deepEqual(blockedDirs(['/run/u/w'], ['/'], ['/run'], searchable), [])
    assert.deepEqual(blockedDirs(['/run/k', '/run/k/deep/w'], ['/', '/run/k'], ['/run'], searchable), [
      '/run/k/deep',
    ])
  })

  it('never a target itself, and one cover serves every target beneath it', () => {
    assert.deepEqual(blockedDirs(['/srv/x', '/srv/x/w'], ['/'], [], closed('/srv/x')), [])
    assert.deepEqual(blockedDirs(['/root/a/w', '/root/b/w'], ['/'], [], closed('/root', '/root/b')), [
      '/root',
    ])
  })
})
