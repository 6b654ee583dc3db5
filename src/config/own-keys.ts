// Copying parsed config objects key by key. JSON5 (like JSON.parse) keeps a `__proto__` key as a
// plain own property, so it is an unknown key like any other (warned about, ignored). An
// assignment `copy[key] = value` of that key instead sets the copy's prototype: the key's
// contents became inherited config that every reader saw (`session.__proto__.dmScope` routed
// as the dmScope) — only in the copies made for `${VAR}`, `$include` and `extends`.

/** `target[key] = value` as an own property, whatever the key. */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
  else target[key] = value;
}

/** `target[key]` when it is the target's own, else undefined (never what it inherits). */
export function getOwn(target: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(target, key) ? target[key] : undefined;
}
