// How big a called function's value becomes for whoever walks it as a tree (JSON.stringify, a printer, a
// loop over an array's length). A structured-clone reply costs at least a byte per slot it holds, except
// in two ways a sandboxed function can use to make a small reply huge on the host: a sparse array (its
// length is free: `a.length = 2 ** 32 - 1` crashed the host's redaction out of memory) and shared
// references (a chain of 64 pairs of the same object is 2^64 nodes to JSON). The reply is judged by this
// size before anything walks it.

/** Slots a tree walker would visit in `value`, counting at most to `limit` (then `limit + 1`). Shared
 * objects count at every reference; a reference back into its own ancestors counts 1 (a cycle). Linear in
 * the distinct objects and their slots, without recursion. */
export function expandedSize(value: unknown, limit: number): number {
  if (value === null || typeof value !== 'object') return 1
  const over = limit + 1
  const size = new Map<object, number>()
  const onPath = new Set<object>()
  // Each frame: an object, its children (once listed) and the size summed so far.
  const stack: { node: object; children: unknown[] | null; sum: number; next: number }[] = []
  const enter = (node: object) => {
    onPath.add(node)
    stack.push({ node, children: null, sum: 1, next: 0 })
  }
  let result = 0
  enter(value)
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!
    if (top.children === null) {
      const listed = childrenOf(top.node, over)
      if (listed === null) top.sum = over
      top.children = listed ?? []
    }
    if (top.sum < over && top.next < top.children.length) {
      const child = top.children[top.next++]
      if (child === null || typeof child !== 'object' || onPath.has(child)) top.sum += 1
      else {
        const known = size.get(child)
        if (known !== undefined) top.sum = Math.min(over, top.sum + known)
        else enter(child)
      }
      continue
    }
    stack.pop()
    onPath.delete(top.node)
    const total = Math.min(over, top.sum)
    size.set(top.node, total)
    const parent = stack[stack.length - 1]
    if (parent) parent.sum = Math.min(over, parent.sum + total)
    else result = total
  }
  return result
}

/** The slots of one object, or null when it alone has more than `max` (an array's length counts). */
function childrenOf(node: object, max: number): unknown[] | null {
  // Bytes are carried one for one: a typed array or buffer is one slot whatever its length.
  if (ArrayBuffer.isView(node) || node instanceof ArrayBuffer) return []
  if (Array.isArray(node)) {
    if (node.length > max) return null
    const slots: unknown[] = new Array(node.length)
    for (let i = 0; i < node.length; i++) slots[i] = node[i]
    return slots
  }
  if (node instanceof Map) {
    if (node.size * 2 > max) return null
    const slots: unknown[] = []
    for (const [k, v] of node) slots.push(k, v)
    return slots
  }
  if (node instanceof Set) return node.size > max ? null : [...node]
  const names = Object.getOwnPropertyNames(node)
  if (names.length > max) return null
  return names.map((k) => (node as Record<string, unknown>)[k])
}
