package word

// storeAfter stores v at p after the stores before it. amd64 makes stores
// visible in program order and the compiler keeps them in order, so a plain
// store does, without the full barrier of an atomic one.
func storeAfter(p *uint64, v uint64) { *p = v }
