package storage

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// dumpCatalog renders what the catalog operations change: collections with their options,
// and the catalog fields of every oplog entry (pre-images, rename targets, collMod options).
func dumpCatalog(e *Engine) string {
	var sb strings.Builder
	e.Read(func(r *Reader) {
		for _, db := range r.Databases() {
			for _, c := range r.Collections(db.Name) {
				fmt.Fprintf(&sb, "coll %s.%s %x count=%d images=%v\n", c.DB, c.Name, c.UUID.Data, c.Count, c.Options.PreAndPostImages)
			}
		}
	})
	for _, ent := range e.OplogAfter(OpTime{}, 0) {
		fmt.Fprintf(&sb, "op %v %s %s.%s pre=%s", ent.TS, ent.Op, ent.DB, ent.Coll, bsonval.Format(ent.Pre))
		if r := ent.Rename; r != nil {
			fmt.Fprintf(&sb, " to=%s.%s dropTarget=%x", r.To.DB, r.To.Coll, r.DropTarget.Data)
		}
		if o := ent.Options; o != nil {
			fmt.Fprintf(&sb, " opts=%+v", o.New)
			if ent.Op == OpCollMod {
				fmt.Fprintf(&sb, " old=%+v", o.Old)
			}
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

func catalogWorkload(t *testing.T, e *Engine) {
	t.Helper()
	mustWrite(t, e, func(w *Writer) error {
		if _, _, err := w.CreateCollectionWith("app", "imaged", CollOptions{PreAndPostImages: true}); err != nil {
			return err
		}
		doc, err := w.Insert("app", "imaged", d("_id", 1, "n", 1))
		if err != nil {
			return err
		}
		if doc, err = w.Replace("app", "imaged", doc, d("_id", 1, "n", 2), &UpdateDesc{UpdatedFields: d("n", 2)}); err != nil {
			return err
		}
		return w.Delete("app", "imaged", doc)
	})
	mustWrite(t, e, func(w *Writer) error {
		doc, err := w.Insert("app", "plain", d("_id", 1, "n", 1))
		if err != nil {
			return err
		}
		// Not enabled: no pre-image.
		if _, err := w.Replace("app", "plain", doc, d("_id", 1, "n", 2), nil); err != nil {
			return err
		}
		if err := w.CollMod("app", "plain", &CollOptions{PreAndPostImages: true}); err != nil {
			return err
		}
		if err := w.CollMod("app", "plain", nil); err != nil {
			return err
		}
		cur, _ := w.Get("app", "plain", int32(1))
		_, err = w.Replace("app", "plain", cur, d("_id", 1, "n", 3), nil)
		return err
	})
	mustWrite(t, e, func(w *Writer) error {
		if _, err := w.Insert("app", "target", d("_id", "t")); err != nil {
			return err
		}
		if err := w.RenameCollection("app", "plain", Namespace{DB: "app", Coll: "target"}, true); err != nil {
			return err
		}
		return w.RenameCollection("app", "imaged", Namespace{DB: "other", Coll: "moved"}, false)
	})
}

func TestCatalogDurable(t *testing.T) {
	dir := t.TempDir()
	e := openDir(t, dir, Options{})
	catalogWorkload(t, e)
	before := dumpCatalog(e)
	for _, want := range []string{
		"coll app.target", "images=true",
		"create app.imaged pre={} opts={PreAndPostImages:true}",
		"update app.imaged pre={ _id: 1, n: 1 }", "delete app.imaged pre={ _id: 1, n: 2 }",
		"replace app.plain pre={}\n", // before collMod enabled images: none
		"collMod app.plain pre={} opts={PreAndPostImages:true} old={PreAndPostImages:false}",
		"collMod app.plain pre={}\n", // a collMod without options is logged too
		"replace app.plain pre={ _id: 1, n: 2 }",
		"rename app.plain pre={} to=app.target dropTarget=", "rename app.imaged pre={} to=other.moved dropTarget=\n",
	} {
		if !strings.Contains(before, want) {
			t.Fatalf("dump lacks %q:\n%s", want, before)
		}
	}
	if strings.Contains(before, "to=app.target dropTarget=\n") {
		t.Fatalf("the rename over app.target does not name the dropped target:\n%s", before)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := openDir(t, dir, Options{})
	if after := dumpCatalog(e2); after != before {
		t.Fatalf("after reopen:\n--- before\n%s\n--- after\n%s", before, after)
	}
	if err := e2.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	e3 := openDir(t, dir, Options{})
	if after := dumpCatalog(e3); after != before {
		t.Fatalf("after compaction + reopen:\n--- before\n%s\n--- after\n%s", before, after)
	}
	// The renamed collection kept its documents and index, and its options.
	e3.Read(func(r *Reader) {
		c, ok := r.Collection("app", "target")
		if !ok || c.Count != 1 || !c.Options.PreAndPostImages {
			t.Errorf("app.target after rename = %+v, %v", c, ok)
		}
		if _, ok := r.Collection("app", "plain"); ok {
			t.Error("app.plain still exists after its rename")
		}
	})
}

func TestCatalogErrors(t *testing.T) {
	e := openMem(t)
	mustWrite(t, e, func(w *Writer) error {
		_, err := w.Insert("app", "a", d("_id", 1))
		if err == nil {
			_, err = w.Insert("app", "b", d("_id", 1))
		}
		return err
	})
	tests := []struct {
		name string
		fn   func(w *Writer) error
		code int32
	}{
		{"rename missing source", func(w *Writer) error {
			return w.RenameCollection("app", "nope", Namespace{DB: "app", Coll: "x"}, false)
		}, mongoerr.NamespaceNotFound},
		{"rename onto an existing collection", func(w *Writer) error {
			return w.RenameCollection("app", "a", Namespace{DB: "app", Coll: "b"}, false)
		}, mongoerr.NamespaceExists},
		{"rename to itself", func(w *Writer) error {
			return w.RenameCollection("app", "a", Namespace{DB: "app", Coll: "a"}, true)
		}, mongoerr.IllegalOperation},
		{"rename to an invalid namespace", func(w *Writer) error {
			return w.RenameCollection("app", "a", Namespace{DB: "bad.db", Coll: "x"}, false)
		}, mongoerr.InvalidNamespace},
		{"collMod of a missing collection", func(w *Writer) error {
			return w.CollMod("app", "nope", nil)
		}, mongoerr.NamespaceNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := dumpCatalog(e)
			_, err := e.Write(t.Context(), tt.fn)
			var me *mongoerr.Error
			if !errors.As(err, &me) || me.Code != tt.code {
				t.Fatalf("err = %v, want code %d", err, tt.code)
			}
			if after := dumpCatalog(e); after != before {
				t.Fatalf("a failed catalog operation changed the state:\n%s\n%s", before, after)
			}
		})
	}
}
