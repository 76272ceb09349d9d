#!/usr/bin/env node
import { Command, CommanderError, Option } from 'commander'
import { PolicyError } from '../errors.js'
import { callCommand } from './call.js'
import { doctorCommand } from './doctor.js'
import { commanderOptions, flagFor } from './flags.js'
import { rootfsCreateCommand, rootfsListCommand } from './rootfs.js'
import { EXIT, runCommand } from './run.js'

function fail(message: string): number {
  process.stderr.write(`cordon: ${message}\n`)
  return EXIT.cordon
}

export async function main(argv: string[]): Promise<number> {
  let code = 0
  const program = new Command('cordon')
    .description('Run untrusted commands under kernel-enforced limits.')
    .enablePositionalOptions()
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s.startsWith('error:') ? `cordon: ${s}` : s) })

  const runCmd = program
    .command('run')
    .description('run CMD in a sandbox')
    .argument('<command...>', 'program and its arguments (put them after --)')
    .passThroughOptions()
    .addOption(
      new Option('--stdin <FILE|->', "feed a file, or '-' for cordon's own stdin (default: EOF at once)"),
    )
    .addOption(new Option('--json', 'print exactly one JSON result on stdout'))
    .action(async (command: string[], values: Record<string, unknown>) => {
      code = await runCommand(command, values)
    })
  for (const option of commanderOptions()) runCmd.addOption(option)

  const callCmd = program
    .command('call')
    .description("call FILE's exported function in a sandbox and print its value")
    .argument('<target>', 'FILE#export')
    .addOption(new Option('--args <JSON>', 'the arguments, as a JSON array'))
    .addOption(new Option('--json', 'print the whole result (with value or error) as one JSON object'))
    .action(async (target: string, values: Record<string, unknown>) => {
      code = await callCommand(target, values)
    })
  for (const option of commanderOptions()) callCmd.addOption(option)

  const rootfs = program.command('rootfs').description('root filesystems for --rootfs')
  rootfs
    .command('create')
    .description('build a Debian root filesystem (debootstrap, minbase) into the cache')
    .argument('<name>', 'name to use with --rootfs')
    .addOption(new Option('--packages <LIST>', 'comma-separated Debian packages to include'))
    .action(async (name: string, values: Record<string, unknown>) => {
      code = await rootfsCreateCommand(name, values)
    })
  rootfs
    .command('list')
    .description('the root filesystems in the cache')
    .addOption(new Option('--json', 'print them as JSON'))
    .action((values: Record<string, unknown>) => {
      code = rootfsListCommand(values)
    })

  program
    .command('doctor')
    .description('say what this machine can enforce, and how to fix what it cannot')
    .addOption(new Option('--json', 'print the report as JSON'))
    .action((values: Record<string, unknown>) => {
      code = doctorCommand(values)
    })

  try {
    await program.parseAsync(argv, { from: 'user' })
    return code
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.code === 'commander.helpDisplayed' || error.code === 'commander.version' ? 0 : EXIT.cordon
    }
    if (error instanceof PolicyError) {
      const root = error.field.split('.')[0]!
      const cliOnly = [...runCmd.options, ...callCmd.options].some((o) => o.long === `--${root}`)
        ? `--${root}`
        : null
      const where = flagFor(error.field) ?? cliOnly ?? root
      return fail(`${where}: ${error.reason}`)
    }
    return fail((error as Error).stack ?? String(error))
  }
}

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code
})
