/** A side effect only: throws on a Node older than `engines.node`. */
export {}
