// `cordon mcp`: the MCP server on stdio. Like `cordon serve`, it is imported only when it runs (dist/mcp/
// is not in the CLI's bundle), so `cordon run` never reads the MCP SDK.
import { policyInput } from './flags.js'

export async function mcpCommand(values: Record<string, unknown>, version: string): Promise<number> {
  const { mcpUntilClosed, parseBudget, parseFunction } = await import('../mcp/stdio.js')
  const policy = policyInput(values)
  await mcpUntilClosed({
    policy,
    ...(values.outputBudget !== undefined ? { budget: parseBudget(String(values.outputBudget)) } : {}),
    functions: ((values.function as string[] | undefined) ?? []).map(parseFunction),
    ...(typeof values.concurrency === 'number' ? { concurrency: values.concurrency } : {}),
    ...(typeof values.keepRuns === 'number' ? { keepRuns: values.keepRuns } : {}),
    version,
  })
  return 0
}
