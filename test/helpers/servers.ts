// Real Redis and PostgreSQL servers for the scale-out tests, from Debian's packages, each private to the
// test process: a fresh temp dir, unix sockets only (no port to race for between parallel suites), no
// persistence, stopped and removed when the process exits. A machine without them skips the tests that
// need them, saying why (`noRedis`, `noPostgres`).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'

const REDIS = '/usr/bin/redis-server'

/** The newest PostgreSQL server's bin directory Debian installed, or null. */
function postgresBin(): string | null {
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return null
  const versions = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(b) - Number(a))
  return versions[0] ? path.join(root, versions[0], 'bin') : null
}

const postgresUid = (): { uid: number; gid: number } | null => {
  const out = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' })
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' })
  if (out.status !== 0 || gid.status !== 0) return null
  return { uid: Number(out.stdout.trim()), gid: Number(gid.stdout.trim()) }
}

/** Why Redis tests cannot run here, or false. */
export const noRedis: string | false = existsSync(REDIS)
  ? false
  : 'redis-server is not installed (apt-get install -y redis-server; scripts/setup.sh does so as root)'

/** Why PostgreSQL tests cannot run here, or false. */
export const noPostgres: string | false = (() => {
  if (!postgresBin())
    return 'PostgreSQL is not installed (apt-get install -y postgresql; scripts/setup.sh does so as root)'
  if (process.getuid?.() === 0 && !postgresUid())
    return 'no postgres user to run PostgreSQL as (initdb refuses root)'
  return false
})()

export interface RunningServer {
  /** A URL the store or queue takes: `redis+unix:///…/redis.sock`, `postgres://postgres@/db?host=/dir`. */
  url: string
  /** The server's process (kill -9 it to test an outage). */
  process: ChildProcess
  stop(): Promise<void>
}

const stops = new Set<() => void>()
process.once('exit', () => {
  for (const stop of stops) stop()
})

async function waitFor(check: () => Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await check()) return
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error(`${what} did not start within ${ms} ms`)
}

/** Answers PING on the socket? */
function redisAnswers(socket: string): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(socket)
    c.once('error', () => resolve(false))
    c.once('connect', () => c.write('PING\r\n'))
    c.once('data', (d) => {
      c.destroy()
      resolve(d.toString().startsWith('+PONG'))
    })
  })
}

/** A private redis-server on a unix socket in a temp dir, ready when it answers PING. */
export async function startRedis(): Promise<RunningServer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cordon-redis-'))
  const socket = path.join(dir, 'redis.sock')
  const child = spawn(
    REDIS,
    [
      '--port',
      '0',
      '--unixsocket',
      socket,
      '--unixsocketperm',
      '700',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      '--maxmemory-policy',
      'noeviction',
      '--daemonize',
      'no',
      '--loglevel',
      'warning',
    ],
    { stdio: 'ignore' },
  )
  const kill = () => {
    child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
  stops.add(kill)
  await waitFor(() => redisAnswers(socket), 'redis-server')
  return {
    url: `redis+unix://${socket}`,
    process: child,
    async stop() {
      stops.delete(kill)
      const exited = new Promise((r) => child.once('exit', r))
      child.kill('SIGKILL')
      if (child.exitCode === null && child.signalCode === null) await exited
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

let dbCount = 0

export interface RunningPostgres extends RunningServer {
  /** A fresh, empty database on this server: its URL. */
  createDatabase(): Promise<string>
}

/**
 * A private PostgreSQL on a unix socket only (listen_addresses ''), with durability off (a test's data is
 * thrown away): initdb, then pg_ctl start, as the postgres user when root (initdb refuses root).
 */
export async function startPostgres(): Promise<RunningPostgres> {
  const bin = postgresBin()
  if (!bin) throw new Error(String(noPostgres))
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cordon-pg-'))
  const owner = process.getuid?.() === 0 ? postgresUid() : null
  if (owner) chownSync(dir, owner.uid, owner.gid)
  chmodSync(dir, 0o700)
  const data = path.join(dir, 'data')
  const asOwner = owner ? { uid: owner.uid, gid: owner.gid } : {}
  const init = spawnSync(path.join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '-N'], {
    ...asOwner,
    encoding: 'utf8',
  })
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`)
  const child = spawn(
    path.join(bin, 'postgres'),
    [
      '-D',
      data,
      '-k',
      dir,
      '-c',
      'listen_addresses=',
      '-c',
      'fsync=off',
      '-c',
      'synchronous_commit=off',
      '-c',
      'full_page_writes=off',
      '-c',
      'max_connections=200',
    ],
    { ...asOwner, stdio: ['ignore', 'ignore', 'pipe'] },
  )
  let log = ''
  child.stderr?.on('data', (d) => {
    if (log.length < 64 * 1024) log += d
  })
  const kill = () => {
    child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
  stops.add(kill)
  const socket = path.join(dir, '.s.PGSQL.5432')
  const psql = (db: string, sql: string) =>
    spawnSync(
      path.join(bin, 'psql'),
      ['-h', dir, '-U', 'postgres', '-d', db, '-v', 'ON_ERROR_STOP=1', '-qAtc', sql],
      {
        encoding: 'utf8',
      },
    )
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`postgres exited: ${log}`)
    return existsSync(socket) && psql('postgres', 'SELECT 1').status === 0
  }, 'postgres')
  const base = `postgres://postgres@/DB?host=${encodeURIComponent(dir)}`
  return {
    url: base.replace('DB', 'postgres'),
    process: child,
    async createDatabase() {
      const name = `t_${process.pid}_${++dbCount}`
      const made = psql('postgres', `CREATE DATABASE ${name}`)
      if (made.status !== 0) throw new Error(`CREATE DATABASE failed: ${made.stderr}`)
      return base.replace('DB', name)
    },
    async stop() {
      stops.delete(kill)
      const exited = new Promise((r) => child.once('exit', r))
      child.kill('SIGQUIT') // immediate shutdown: nothing of a test's data is worth a checkpoint
      if (child.exitCode === null && child.signalCode === null) await exited
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
