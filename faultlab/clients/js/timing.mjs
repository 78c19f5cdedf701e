// Time and waiting, as asyncio gives them to the Python clients.

export const now = () => performance.now() / 1000;
export const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));
export const round = (x, digits) => Math.round(x * 10 ** digits) / 10 ** digits;

/** Whether `promise` settled within `seconds`. */
export async function within(promise, seconds) {
  let timer;
  const late = new Promise((resolve) => { timer = setTimeout(() => resolve(false), seconds * 1000); });
  try {
    return await Promise.race([promise.then(() => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A flag that can be waited for (asyncio.Event). */
export class Flag {
  #set = false;
  #waiters = [];

  isSet() { return this.#set; }

  set() {
    if (this.#set) return;
    this.#set = true;
    for (const wake of this.#waiters.splice(0)) wake();
  }

  clear() { this.#set = false; }

  wait() { return this.#set ? Promise.resolve() : new Promise((wake) => this.#waiters.push(wake)); }
}
