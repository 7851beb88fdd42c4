// Package jobtest makes jobs for tests with every field set, found by
// reflection: a test that carries one through a shape of a job (a queue
// entry, a state file, labels, a receipt, a view) fails when a field added
// to job.Job, Owner, Trace or Control does not reach that shape.
package jobtest

import (
	"reflect"
	"time"

	"github.com/hermesrun/hermes/job"
)

// At is the time every time field of a Full job holds: UTC, whole
// microseconds, so that it survives every encoding unchanged.
var At = time.Date(2026, 12, 7, 6, 30, 0, 123456000, time.UTC)

// Full returns a job whose every field is set, to values that differ with
// seed (a lowercase word) and that no encoding changes: text of letters
// and digits, whole numbers, At. Its ID is a valid process id.
func Full(seed string) job.Job {
	var j job.Job
	fill(reflect.ValueOf(&j).Elem(), seed)
	j.ID = "proc_" + hex12(seed)
	return j
}

// Owner is Full(seed)'s Owner.
func Owner(seed string) job.Owner { return Full(seed).Owner }

func hex12(seed string) string {
	const digits = "0123456789abcdef"
	b := []byte("000000000000")
	for i := range len(seed) {
		b[i%12] = digits[(int(b[i%12])+int(seed[i]))%16]
	}
	return string(b)
}

func fill(v reflect.Value, name string) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(At))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), name+v.Type().Field(i).Name)
			}
		}
	case reflect.String:
		v.SetString(name)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(7 + len(name)))
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), name)
		v.Set(s)
	default:
		panic("jobtest: no value for a field of kind " + v.Kind().String() + " (" + name + ")")
	}
}
