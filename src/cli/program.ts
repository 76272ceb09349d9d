// The CLI's commands: flags from the policy schema, one exit code per outcome (see EXIT_CODES).
import { readFileSync } from 'node:fs'
import { Command, CommanderError, Option } from 'commander'
import { CordonError, PolicyError } from '../errors.js'
import { errorResult } from '../index.js'
import { callCommand } from './call.js'
import { doctorCommand } from './doctor.js'
import { commanderOptions, flagFor } from './flags.js'
import { keyCreateOptions } from './keys.js'
import { mcpCommand } from './mcp.js'
import { EXIT_BROKEN_PIPE, pipeBroken, print, watchOwnPipes } from './pipes.js'
import { rootfsCreateCommand, rootfsDeleteCommand, rootfsListCommand } from './rootfs.js'
import { EXIT, runCommand } from './run.js'
import {
  durationArg,
  keysCreateCommand,
  keysListCommand,
  keysRevokeCommand,
  serveCommand,
  sizeArg,
  wholeNumber,
} from './serve.js'

/** package.json is two levels up from both src/cli/program.ts and dist/cli/program.js. */
function packageVersion(): string {
  const pkg: unknown = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'))
  const version = (pkg as { version?: unknown }).version
  return typeof version === 'string' ? version : 'unknown'
}

/**
 * The flags of `run` (before its command: `--` or its first word) or of `call` (around its target), read
 * as commander reads them, so that a usage error can still honour `--json` when commander stopped before
 * reaching it.
 */
function commandFlags(argv: readonly string[], options: readonly Option[]): Map<string, string | true> {
  const flags = new Map<string, string | true>()
  if (argv[0] !== 'run' && argv[0] !== 'call') return flags
  for (let i = 1; i < argv.length; i++) {
    const token = argv[i]!
    if (token === '--') break
    if (!token.startsWith('-')) {
      if (argv[0] === 'run') break
      continue // call's target
    }
    const eq = token.indexOf('=')
    const name = eq > 0 ? token.slice(0, eq) : token
    const option = options.find((o) => o.long === name || o.short === name)
    if (!option?.long) continue // unknown: commander refuses it, the rest may still say --json
    const next = argv[i + 1]
    if (eq > 0) flags.set(option.long, token.slice(eq + 1))
    else if (next !== undefined && (option.required || (option.optional && !next.startsWith('-')))) {
      flags.set(option.long, next)
      i++
    } else flags.set(option.long, true)
  }
  return flags
}

/** The subject of a commander error: the flag in "unknown option '--bogus'", or the argument's name. */
function commanderSubject(message: string): string {
  return /'(-{0,2}[\w-]+)/.exec(message)?.[1] ?? 'cordon'
}

const EXIT_CODES = `
Exit codes:
  N      the program's own exit code (0: ok)
  128+N  the program died of signal N
  124    a limit was hit (timeout, cpu-time, memory, output-limit, process-limit, file-size)
  125    cordon itself could not run (a bad flag: the message names it)
  126    denied (--allow/--deny) or not executable
  127    command not found
  130    canceled (Ctrl-C, SIGTERM, SIGHUP)
  141    the reader of cordon's output went away`

const RUN_HELP = `
Examples:
  cordon run -- python3 -c 'print(1)'
  cordon run --timeout 2s --memory 256M --net none -- sh -c 'make test'
  cordon run --net 'allow:pypi.org,*.pythonhosted.org' --writable . -- pip download requests
  cordon run --json --max-output 64K -- ./untrusted   (one JSON result on stdout)
  CORDON_API_KEY=cordon_… cordon run --server http://127.0.0.1:7070 -- make test
${EXIT_CODES}`

const CALL_HELP = `
Examples:
  cordon call ./tools.mjs#add --args '[1, 2]'
  cordon call ./grade.mjs#grade --args '["submission.py"]' --timeout 10s --json

Exit codes:
  0      the function returned (its value is on stdout)
  1      the function threw (its stack is on stderr)
  124    a limit was hit (timeout, cpu-time, memory, output-limit, process-limit, file-size)
  125    cordon could not run or the call could not be made (bad flag, module did not load, no such export)
  130    canceled (Ctrl-C, SIGTERM, SIGHUP)
  141    the reader of cordon's output went away`

const WASM_HELP = `
Every exec the guest makes is a sandbox under the run flags (--timeout, --memory, --allow, --net …);
the guest itself is bounded by the --wasm-* flags. Exec is off unless --max-execs says how many.

Examples:
  cordon wasm ./challenge.wasm --invoke evaluate --max-execs 20 --allow python3 --timeout 5s
  cordon wasm ./tool.wasm --clock fixed:1700000000000 --json -- first-arg
  cordon wasm ./untrusted.wasm --wasm-isolation sandbox --wasm-memory 64M
${EXIT_CODES}`

const MCP_HELP = `
The flags are the most any tool call may ask: --timeout, --memory … bound each run's limits, --net the
network it may ask (and its default); --allow, --deny, --env, --redact … are set in every run.

Examples:
  cordon mcp --timeout 2m --memory 1G --net none
  cordon mcp --net 'allow:pypi.org,*.pythonhosted.org' --function grade=./grade.mjs#grade
  Claude Desktop: { "command": "npx", "args": ["cordon", "mcp", "--timeout", "2m"] }`

/** The subcommands, each added by `main` only when it is the one asked for (or when none is). */
const SUBCOMMANDS = new Set(['run', 'call', 'wasm', 'rootfs', 'doctor', 'serve', 'mcp', 'keys'])

export async function main(argv: string[]): Promise<number> {
  let code = 0
  // Only the subcommand being run is built (each start builds what it parses, ~80 options in all, for one
  // command's): a subcommand's parsing, help and errors never look at its siblings. Without one (`cordon
  // --help`, `cordon help run`, a typo), all of them, for the list and the suggestions.
  const wanted = (name: string) => !SUBCOMMANDS.has(argv[0] ?? '') || argv[0] === name
  const program = new Command('cordon')
    .description('Run untrusted commands under kernel-enforced limits.')
    .version(packageVersion(), '-V, --version', 'print the version')
    .enablePositionalOptions()
    .exitOverride()
    .configureOutput({
      writeOut: (s) => print(process.stdout, s),
      writeErr: (s) => print(process.stderr, s.startsWith('error:') ? `cordon: ${s}` : s),
    })

  const runCmd = wanted('run') ? program.command('run') : undefined
  runCmd
    ?.description('run CMD in a sandbox')
    .argument('<command...>', 'program and its arguments (put them after --)')
    .passThroughOptions()
    .addOption(
      new Option(
        '--stdin <FILE|-|none>',
        "feed a file, '-' for cordon's own stdin, or 'none' for EOF at once (default: cordon's stdin when it is a pipe or a file, else EOF)",
      ),
    )
    .addOption(new Option('--json', 'print exactly one JSON result on stdout'))
    .addOption(
      new Option(
        '--server <URL>',
        'run it on a `cordon serve` at URL instead (the API key from $CORDON_API_KEY)',
      ),
    )
    .action(async (command: string[], values: Record<string, unknown>) => {
      code = await runCommand(command, values)
    })
  if (runCmd) {
    for (const option of commanderOptions()) runCmd.addOption(option)
    runCmd.addHelpText('after', RUN_HELP)
  }

  const callCmd = wanted('call') ? program.command('call') : undefined
  callCmd
    ?.description("call FILE's exported function in a sandbox and print its value")
    .argument('<target>', 'FILE#export')
    .addOption(new Option('--args <JSON>', 'the arguments, as a JSON array'))
    .addOption(new Option('--json', 'print the whole result (with value or error) as one JSON object'))
    .action(async (target: string, values: Record<string, unknown>) => {
      code = await callCommand(target, values)
    })
  if (callCmd) {
    for (const option of commanderOptions()) callCmd.addOption(option)
    callCmd.addHelpText('after', CALL_HELP)
  }

  const wasmCmd = wanted('wasm') ? program.command('wasm') : undefined
  wasmCmd
    ?.description('run a WebAssembly guest whose execs are sandboxes (platform_sandbox, cordon, WASI)')
    .argument('<module>', 'the .wasm file')
    .argument('[args...]', "the guest's WASI arguments (put them after --)")
    .addOption(new Option('--json', 'print exactly one JSON result (a WasmResult) on stdout'))
    .action(async (file: string, args: string[], values: Record<string, unknown>) => {
      const { wasmCommand } = await import('./wasm.js')
      code = await wasmCommand(file, args, values)
    })
  // Its flags come from the WASM face's schema, outside the bundle: loaded only for `wasm` itself (and
  // `help wasm`); a list of all commands shows it by its description.
  if (wasmCmd && (argv[0] === 'wasm' || (argv[0] === 'help' && argv[1] === 'wasm'))) {
    const { wasmCommandOptions } = await import('./wasm.js')
    for (const option of await wasmCommandOptions()) wasmCmd.addOption(option)
    wasmCmd.addHelpText('after', WASM_HELP)
  }

  const rootfs = wanted('rootfs')
    ? program.command('rootfs').description('root filesystems for --rootfs')
    : undefined
  rootfs
    ?.command('create')
    .description('build a Debian root filesystem (debootstrap, minbase) into the cache')
    .argument('<name>', 'name to use with --rootfs')
    .addOption(new Option('--packages <LIST>', 'comma-separated Debian packages to include'))
    .action(async (name: string, values: Record<string, unknown>) => {
      code = await rootfsCreateCommand(name, values)
    })
  rootfs
    ?.command('list')
    .description('the root filesystems in the cache')
    .addOption(new Option('--json', 'print them as JSON'))
    .action((values: Record<string, unknown>) => {
      code = rootfsListCommand(values)
    })

  rootfs
    ?.command('delete')
    .description('remove a root filesystem from the cache')
    .argument('<name>', 'its name, as `cordon rootfs list` shows it')
    .action((name: string) => {
      code = rootfsDeleteCommand(name)
    })

  if (wanted('doctor'))
    program
      .command('doctor')
      .description('say what this machine can enforce, and how to fix what it cannot')
      .addOption(new Option('--json', 'print the report as JSON'))
      .action((values: Record<string, unknown>) => {
        code = doctorCommand(values)
      })

  const dataDirOption = () =>
    new Option(
      '--data-dir <DIR>',
      "the service's data (default: $XDG_DATA_HOME/cordon or ~/.local/share/cordon)",
    )
  if (wanted('serve'))
    program
      .command('serve')
      .description('serve the HTTP API (POST /v1/runs …) on loopback; SIGTERM drains, then exits')
      .addOption(new Option('--host <HOST>', 'address to listen on').default('127.0.0.1'))
      .addOption(
        new Option('--port <N>', 'port to listen on (0: any free one)')
          .default(7070)
          .argParser(wholeNumber(0, 65535)),
      )
      .addOption(dataDirOption())
      .addOption(new Option('--concurrency <N>', 'runs at once (default 2)').argParser(wholeNumber(1, 1024)))
      .addOption(
        new Option(
          '--warm <N>',
          'warm members kept ready, each a namespace-tier sandbox made ahead of its run in its own workspace (default 0; at most 64)',
        ).argParser(wholeNumber(0, 64)),
      )
      .addOption(
        new Option('--max-queued <N>', 'runs waiting at most (default 100)').argParser(
          wholeNumber(0, 1_000_000),
        ),
      )
      .addOption(
        new Option(
          '--max-connections <N>',
          'connections held at once (default 1024); past it the oldest that sent no whole request gives way, or the new one is closed',
        ).argParser(wholeNumber(1, 1_000_000)),
      )
      .addOption(
        new Option(
          '--max-connections-per-address <N>',
          'connections held from one address (default 256; the loopback is one, an IPv6 /64 is one); past it, its oldest idle one gives way',
        ).argParser(wholeNumber(1, 1_000_000)),
      )
      .addOption(
        new Option(
          '--max-output <SIZE>',
          'the most output any run may keep, whatever its key allows: the server holds it (default 16M)',
        ).argParser(sizeArg),
      )
      .addOption(
        new Option(
          '--max-log <SIZE>',
          'the most log any run may keep, whatever its key allows (default 16M)',
        ).argParser(sizeArg),
      )
      .addOption(
        new Option(
          '--max-wall-time <DURATION>',
          'the longest any run may ask to run, whatever its key allows (default 1h)',
        ).argParser(durationArg),
      )
      .addOption(
        new Option(
          '--max-collect <SIZE>',
          'the most collected files any run may keep (default 64M)',
        ).argParser(sizeArg),
      )
      .addOption(
        new Option(
          '--max-workspace <SIZE>',
          "the most a run's workspace may hold (default 1G; as root a tmpfs, charged to the run's memory)",
        ).argParser(sizeArg),
      )
      .addOption(
        new Option(
          '--max-stdin <SIZE>',
          "the most of a run's open stdin held unread; a write past it is refused (default 1M)",
        ).argParser(sizeArg),
      )
      .addOption(
        new Option(
          '--max-stdin-per-key <SIZE>',
          "the same for all of one key's runs together (default 8M)",
        ).argParser(sizeArg),
      )
      .addOption(
        new Option(
          '--max-retention <DURATION>',
          'how long a finished run is kept at most, whatever its key says (default 30d)',
        ).argParser(durationArg),
      )
      .addOption(new Option('--allow-private-webhooks', 'let webhooks go to loopback or private addresses'))
      .addOption(new Option('--public-metrics', 'serve /metrics without a key (default: an admin key)'))
      .addOption(
        new Option(
          '--allowed-host <NAME>',
          'a Host name served besides IP literals and localhost (repeatable; .NAME: it and its subdomains; any: no check)',
        ).argParser((value: string, previous: string[] = []) => [...previous, value]),
      )
      .action(async (values: Record<string, unknown>) => {
        code = await serveCommand(values)
      })

  const mcpCmd = wanted('mcp') ? program.command('mcp') : undefined
  mcpCmd
    ?.description('serve MCP on stdio: tools that run commands in sandboxes, within these flags')
    .addOption(
      new Option(
        '--output-budget <SIZE>',
        'bytes of output a tool result holds; the rest is paged (default 8K)',
      ),
    )
    .addOption(
      new Option('--function <NAME=FILE#EXPORT>', 'a function call_function may call (repeatable)').argParser(
        (value: string, previous: string[] = []) => [...previous, value],
      ),
    )
    .addOption(
      new Option('--concurrency <N>', 'runs at once, and as many function calls (default 2)').argParser(
        wholeNumber(1, 1024),
      ),
    )
    .addOption(
      new Option(
        '--keep-runs <N>',
        'runs kept with their output, newest first; older finished ones are removed (default 200)',
      ).argParser(wholeNumber(1, 1_000_000)),
    )
    .action(async (values: Record<string, unknown>) => {
      code = await mcpCommand(values, packageVersion())
    })
  if (mcpCmd) {
    for (const option of commanderOptions()) mcpCmd.addOption(option)
    mcpCmd.addHelpText('after', MCP_HELP)
  }

  if (wanted('keys')) {
    const keys = program.command('keys').description("the service's API keys (no running server needed)")
    const keysCreate = keys.command('create').description('create a key and print it (shown only this once)')
    for (const option of keyCreateOptions()) keysCreate.addOption(option)
    keysCreate
      .addOption(dataDirOption())
      .addOption(new Option('--json', 'print it as JSON'))
      .action(async (values: Record<string, unknown>) => {
        code = await keysCreateCommand(values)
      })
    keys
      .command('list')
      .description('the keys (never their secrets)')
      .addOption(dataDirOption())
      .addOption(new Option('--json', 'print them as JSON'))
      .action(async (values: Record<string, unknown>) => {
        code = await keysListCommand(values)
      })
    keys
      .command('revoke')
      .description('revoke a key: it authenticates no more')
      .argument('<id>', 'its id, as `cordon keys list` shows it')
      .addOption(dataDirOption())
      .action(async (id: string, values: Record<string, unknown>) => {
        code = await keysRevokeCommand(id, values)
      })
  }

  try {
    await program.parseAsync(argv, { from: 'user' })
    return code
  } catch (error) {
    let limit: string
    let message: string
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version') return 0
      // commander has printed the message already (writeErr above).
      limit = commanderSubject(error.message)
      message = error.message.replace(/^error: /, '').trim()
    } else if (error instanceof PolicyError) {
      const root = error.field.split('.')[0]!
      const cliOnly = [...(runCmd?.options ?? []), ...(callCmd?.options ?? [])].some(
        (o) => o.long === `--${root}`,
      )
        ? `--${root}`
        : null
      limit = flagFor(error.field) ?? cliOnly ?? root
      message = error.reason
      print(process.stderr, `cordon: ${limit}: ${message}\n`)
    } else if (error instanceof CordonError) {
      // The machine's answer to a management call (a root filesystem's build): said, not a stack trace.
      limit = 'cordon'
      message = error.message
      print(process.stderr, `cordon: ${message}\n`)
    } else {
      limit = 'cordon'
      message = error instanceof Error ? error.message : String(error)
      print(process.stderr, `cordon: ${error instanceof Error ? (error.stack ?? message) : message}\n`)
    }
    // `run --json` and `call --json` promise exactly one result object on stdout, a usage error included.
    const flags = commandFlags(argv, (argv[0] === 'call' ? callCmd : runCmd)?.options ?? [])
    if (flags.get('--json') === true)
      print(
        process.stdout,
        `${JSON.stringify(errorResult(limit, message, { isolation: flags.get('--isolation') }))}\n`,
      )
    return EXIT.cordon
  }
}

/** Run the CLI on `argv` (without node and the script) and set the process's exit code. */
export async function cli(argv: string[]): Promise<void> {
  watchOwnPipes()
  const code = await main(argv)
  process.exitCode = pipeBroken() ? EXIT_BROKEN_PIPE : code
}
