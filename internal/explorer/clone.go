package explorer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"
)

// fastClones: Clone deep-copies a decoded copy of the last state it
// cloned when w's JSON is that state's; off, it always decodes
// (TestFastPathsExploreTheSame compares the two).
var fastClones = true

// lastClone is the state Clone decoded last: its JSON, and what decoding
// it gave, never handed out.
var lastClone struct {
	sync.Mutex
	enc  []byte
	kept *World
}

// decoded is what decoding enc gives (a World whose peer, if any, is not
// linked yet). A clone is a state's JSON decoded, so two states with the
// same JSON have equal clones; a state's successors are each a clone of
// it (a reconcile, a crash at each persisted step, each transition, most
// of which do not apply), and decoding each was a fifth of the explorer's
// CPU. So the last JSON decoded is kept with its decoding, and the same
// JSON again gets a deep copy of that, equal to a decoding field by field
// (nil and empty alike) at a fraction of its cost.
func decoded(enc []byte) *World {
	if !fastClones {
		out := &World{}
		if err := json.Unmarshal(enc, out); err != nil {
			panic(err)
		}
		return out
	}
	lastClone.Lock()
	defer lastClone.Unlock()
	if lastClone.kept == nil || !bytes.Equal(enc, lastClone.enc) {
		kept := &World{}
		if err := json.Unmarshal(enc, kept); err != nil {
			panic(err)
		}
		lastClone.enc, lastClone.kept = enc, kept
	}
	return deepCopy(reflect.ValueOf(lastClone.kept)).Interface().(*World)
}

// deepCopy copies v and everything it points to, keeping nil maps,
// slices and pointers nil and empty ones empty. A type with a generated
// DeepCopyInto (the API's types) is copied by it; a struct with
// unexported fields and none is copied by value, which only time.Time
// may be (its Location is never changed).
func deepCopy(v reflect.Value) reflect.Value {
	t := v.Type()
	switch t.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return reflect.Zero(t)
		}
		out := reflect.New(t.Elem())
		out.Elem().Set(deepCopy(v.Elem()))
		return out
	case reflect.Map:
		if v.IsNil() {
			return reflect.Zero(t)
		}
		out := reflect.MakeMapWithSize(t, v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), deepCopy(it.Value()))
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return reflect.Zero(t)
		}
		out := reflect.MakeSlice(t, v.Len(), v.Len())
		if flat(t.Elem()) {
			reflect.Copy(out, v)
			return out
		}
		for i := range v.Len() {
			out.Index(i).Set(deepCopy(v.Index(i)))
		}
		return out
	case reflect.Struct:
		p := planOf(t)
		out := reflect.New(t)
		if p.deepCopyInto >= 0 {
			in := reflect.New(t)
			in.Elem().Set(v)
			in.Method(p.deepCopyInto).Call([]reflect.Value{out})
			return out.Elem()
		}
		out.Elem().Set(v)
		for _, i := range p.refs {
			out.Elem().Field(i).Set(deepCopy(v.Field(i)))
		}
		return out.Elem()
	case reflect.Interface, reflect.Array, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		panic(fmt.Sprintf("deepCopy: %s is not copied", t))
	}
	return v // a bool, a number or a string
}

// flat: a value of t holds no reference.
func flat(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64, reflect.String:
		return true
	}
	return false
}

// plan is how deepCopy copies a struct type: by its DeepCopyInto (the
// method's index on its pointer type; -1: none), else by value and then
// refs, the indexes of its fields that hold references.
type plan struct {
	deepCopyInto int
	refs         []int
}

// plans are the struct types' plans, guarded by lastClone's lock (deepCopy
// runs under it).
var plans = map[reflect.Type]plan{}

// planOf is t's plan; a struct without DeepCopyInto that has an
// unexported field is refused, but time.Time.
func planOf(t reflect.Type) plan {
	if p, ok := plans[t]; ok {
		return p
	}
	p := plan{deepCopyInto: -1}
	pt := reflect.PointerTo(t)
	if m, ok := pt.MethodByName("DeepCopyInto"); ok && m.Type.NumIn() == 2 && m.Type.In(1) == pt {
		p.deepCopyInto = m.Index
	} else {
		for i := range t.NumField() {
			f := t.Field(i)
			switch {
			case !f.IsExported() && t != reflect.TypeFor[time.Time]():
				panic(fmt.Sprintf("deepCopy: %s has unexported field %s", t, f.Name))
			case f.IsExported() && !flat(f.Type):
				p.refs = append(p.refs, i)
			}
		}
	}
	plans[t] = p
	return p
}
