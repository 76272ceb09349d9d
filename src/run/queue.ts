// An async-iterable queue: chunks pushed by the supervisor, pulled by `for await` at the caller's pace.
// One reader at a time: each chunk goes to exactly one, so a second concurrent one is refused, loudly.
export class ChunkQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = []
  private waiting: ((r: IteratorResult<T>) => void) | null = null
  private ended = false
  private reading = false

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

  [Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.reading) throw new TypeError('output is being iterated already: one reader at a time')
    this.reading = true
    let done = false
    // The next reader goes on from here: a `break` (return) hands the rest over.
    const finish = (): IteratorResult<T> => {
      if (!done) this.reading = false
      done = true
      return { value: undefined, done: true }
    }
    return {
      next: async () => {
        if (done) return finish()
        if (this.items.length > 0) return { value: this.items.shift()!, done: false }
        if (this.ended) return finish()
        const r = await new Promise<IteratorResult<T>>((resolve) => {
          this.waiting = resolve
        })
        return r.done ? finish() : r
      },
      return: async () => finish(),
    }
  }
}
