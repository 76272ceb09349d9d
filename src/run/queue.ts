// An async-iterable queue: chunks pushed by the supervisor, pulled by `for await` at the caller's pace.
export class ChunkQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = []
  private waiting: ((r: IteratorResult<T>) => void) | null = null
  private ended = false

  push(item: T): void {
    if (this.waiting) {
      const resolve = this.waiting
      this.waiting = null
      resolve({ value: item, done: false })
    } else this.items.push(item)
  }

  end(): void {
    this.ended = true
    this.waiting?.({ value: undefined, done: true })
    this.waiting = null
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const next = this.items.shift()
      if (next !== undefined) {
        yield next
        continue
      }
      if (this.ended) return
      const r = await new Promise<IteratorResult<T>>((resolve) => {
        this.waiting = resolve
      })
      if (r.done) return
      yield r.value
    }
  }
}
