// Filesystem policy from inside a real sandbox: hidden paths, tmpfs size, strict mode, symlinks.
import assert from 'node:assert/strict'
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { run } from '../../src/index.js'
import { noNamespace } from '../helpers.js'

// Outside /tmp (which the sandbox replaces), so the sandbox would see these unless hidden.
const base = mkdtempSync('/var/tmp/cordon-fs-')
chmodSync(base, 0o755)
after(() => rmSync(base, { recursive: true, force: true }))

describe('filesystem (namespace tier)', { skip: noNamespace }, () => {
  const isolation = 'namespace'

  it("hides cordon's home by default", async () => {
    const secret = path.join(os.homedir(), `.cordon-secret-${process.pid}`)
    writeFileSync(secret, 'token', { mode: 0o644 })
    try {
      const r = await run(
        ['sh', '-c', `cat ${secret} 2>/dev/null || echo hidden; ls -A ${os.homedir()} | wc -l`],
        {
          isolation,
          cwd: '/',
        },
      )
      assert.equal(r.stdout, 'hidden\n0\n')
    } finally {
      rmSync(secret)
    }
  })

  it('hide: a directory shows empty, a file reads as /dev/null, a writable path inside still shows', async () => {
    const dir = path.join(base, 'creds')
    const inner = path.join(dir, 'work')
    mkdirSync(inner, { recursive: true })
    chmodSync(inner, 0o777)
    writeFileSync(path.join(dir, 'key'), 'secret')
    const file = path.join(base, 'config.json')
    writeFileSync(file, '{"token": 1}')
    const r = await run(
      [
        'sh',
        '-c',
        `ls ${dir}; cat ${file}; echo -; echo ok > ${inner}/out && cat ${inner}/out; touch ${dir}/x || echo ro`,
      ],
      { isolation, cwd: '/', hide: [dir, file], writable: [inner] },
    )
    assert.equal(r.stdout, 'work\n-\nok\nro\n')
    assert.equal(existsSync(path.join(dir, 'x')), false)
  })

  it('hiding a path that does not exist is fine', async () => {
    const r = await run(['true'], { isolation, hide: ['/does/not/exist'] })
    assert.equal(r.status, 'ok')
  })

  it('/tmp has a size limit; filling it is an ordinary write error', async () => {
    const r = await run(
      ['sh', '-c', 'head -c 20000000 /dev/zero > /tmp/fill || echo full; du -k /tmp/fill'],
      {
        isolation,
        limits: { tmpfsBytes: '8M' },
      },
    )
    assert.equal(r.status, 'ok')
    assert.match(r.stderr, /No space left on device/)
    assert.match(r.stdout, /^full\n8192\t/)
  })

  it('strict mode: only system directories and readable paths are visible', async () => {
    const visible = path.join(base, 'visible')
    mkdirSync(visible)
    writeFileSync(path.join(visible, 'data'), 'here')
    writeFileSync(path.join(base, 'invisible'), 'not here')
    const r = await run(
      [
        'sh',
        '-c',
        `cat ${visible}/data; echo; ls ${base}; ls /work 2>/dev/null || echo no-work; test -e /etc/hostname || echo no-hostname; python3 -c 'print(3)'`,
      ],
      { isolation, cwd: '/', readable: [visible] },
    )
    assert.equal(r.stdout, `here\nvisible\nno-work\nno-hostname\n3\n`)
  })

  it('strict mode with all of /etc readable, or cwd /etc, starts (no system path bound again inside)', async () => {
    const a = await run(['cat', '/etc/hostname'], { isolation, cwd: '/', readable: ['/etc'] })
    assert.equal(a.status, 'ok', a.stderr)
    const b = await run(['ls', 'passwd'], { isolation, cwd: '/etc', readable: [] })
    assert.equal(b.status, 'ok', b.stderr)
  })

  it('a hidden file inside a writable path reads empty and is never changed', async () => {
    const dir = path.join(base, 'hidden-file')
    mkdirSync(dir)
    chmodSync(dir, 0o777)
    writeFileSync(path.join(dir, '.env'), 'SECRET=1')
    const r = await run(['sh', '-c', 'cat .env; echo x > .env; echo done'], {
      isolation,
      cwd: dir,
      writable: [dir],
      hide: [path.join(dir, '.env')],
    })
    assert.equal(r.stdout, 'done\n')
    assert.equal(readFileSync(path.join(dir, '.env'), 'utf8'), 'SECRET=1')
  })

  it('strict mode needs the namespace tier: the process tier refuses it', async () => {
    const r = await run(['true'], { isolation: 'process', readable: [base] })
    assert.equal(r.status, 'error')
    assert.equal(r.violation?.limit, 'readable')
  })

  it('a hide list given to the process tier (no mount namespace) is refused, not dropped', async () => {
    const r = await run(['true'], { isolation: 'process', hide: [base] })
    assert.equal(r.status, 'error')
    assert.equal(r.violation?.limit, 'hide')
    assert.match(r.violation?.message ?? '', /namespace tier/)
    // The default list and an empty one ask for nothing the tier cannot give.
    assert.equal((await run(['true'], { isolation: 'process' })).status, 'ok')
    assert.equal((await run(['true'], { isolation: 'process', hide: [] })).status, 'ok')
  })

  it('a symlinked writable path is bound at its real place; a symlink inside cannot write elsewhere', async () => {
    const real = path.join(base, 'real')
    mkdirSync(real)
    chmodSync(real, 0o777)
    const link = path.join(base, 'link')
    symlinkSync(real, link)
    symlinkSync('/etc', path.join(real, 'escape'))
    const r = await run(
      ['sh', '-c', `echo a > ${link}/via-link && echo b > ${real}/escape/cordon-x || echo refused`],
      {
        isolation,
        cwd: '/',
        writable: [link],
      },
    )
    assert.equal(r.stdout, 'refused\n')
    assert.equal(existsSync(path.join(real, 'via-link')), true)
    assert.equal(existsSync('/etc/cordon-x'), false)
  })
})
