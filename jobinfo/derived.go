package jobinfo

import "sync"

// derived holds what other packages build from a kind's Info and keep for as long as the kind: package
// uniqueness keeps the kind's insert statements there, and the state that lets concurrent enqueues
// share their notifications. Define gives each Info its own; it belongs to that Info only (owner), so a
// copy of the Info, whose fields may then differ, never uses it.
type derived struct {
	owner  *Info
	mu     sync.Mutex
	values map[any]any
}

// Derived returns the value kept under key for this kind, calling build to make it the first time.
// Packages that work from a kind keep here what they compute once from its description, so that it
// lives exactly as long as the kind, instead of in a process-wide cache that nothing empties. key
// should be a value of an unexported type of the calling package, as with context.WithValue; build
// must not call Derived on the same Info.
//
// Only an Info made by Define keeps values. For any other (a literal, such as one read from the
// registry, or a copy of one made by Define) Derived calls build every time and keeps nothing.
func (i *Info) Derived(key any, build func() any) any {
	d := i.derived
	if d == nil || d.owner != i {
		return build()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, ok := d.values[key]; ok {
		return v
	}
	if d.values == nil {
		d.values = map[any]any{}
	}
	v := build()
	d.values[key] = v
	return v
}
