package embedded

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

// Where createUser stores users, as mongod does: one document per user, _id "<db>.<name>".
const (
	usersDB   = "admin"
	usersColl = "system.users"
	// scramMech is the one SASL mechanism the server implements.
	scramMech = "SCRAM-SHA-256"
	// scramIterations and scramSaltLen are mongod's defaults for SCRAM-SHA-256
	// (scramSHA256IterationCount, a 28-byte salt).
	scramIterations = 15000
	scramSaltLen    = 28
)

// User is a user given in Config.Users: a name, its authentication database (default
// "admin") and either a password or precomputed SCRAM-SHA-256 credentials. Every user of the
// embedded server has all privileges (role root).
type User struct {
	Name string
	DB   string
	// Password is the clear password; the server keeps only credentials derived from it.
	Password string
	// SCRAMSHA256 are precomputed credentials (as usersInfo's showCredentials prints them).
	SCRAMSHA256 *SCRAMCredentials
}

// SCRAMCredentials are a user's stored SCRAM-SHA-256 keys, in the form of mongod's
// admin.system.users credentials["SCRAM-SHA-256"]: the salt and keys base64-encoded.
type SCRAMCredentials struct {
	IterationCount int    `bson:"iterationCount" json:"iterationCount" yaml:"iterationCount"`
	Salt           string `bson:"salt" json:"salt" yaml:"salt"`
	StoredKey      string `bson:"storedKey" json:"storedKey" yaml:"storedKey"`
	ServerKey      string `bson:"serverKey" json:"serverKey" yaml:"serverKey"`
}

// DeriveSCRAMCredentials computes the SCRAM-SHA-256 credentials of a password with a fresh
// random salt (what createUser stores; the password itself is never kept).
func DeriveSCRAMCredentials(name, password string) (SCRAMCredentials, error) {
	client, err := scram.SHA256.NewClient(name, password, "")
	if err != nil {
		return SCRAMCredentials{}, fmt.Errorf("prepare password (SASLprep): %w", err)
	}
	salt := make([]byte, scramSaltLen)
	_, _ = rand.Read(salt)
	c, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: scramIterations})
	if err != nil {
		return SCRAMCredentials{}, fmt.Errorf("derive SCRAM keys: %w", err)
	}
	enc := base64.StdEncoding.EncodeToString
	return SCRAMCredentials{IterationCount: scramIterations, Salt: enc(salt), StoredKey: enc(c.StoredKey), ServerKey: enc(c.ServerKey)}, nil
}

// stored decodes the credentials for the SCRAM server.
func (c SCRAMCredentials) stored() (scram.StoredCredentials, error) {
	dec := base64.StdEncoding.DecodeString
	salt, err := dec(c.Salt)
	if err != nil {
		return scram.StoredCredentials{}, fmt.Errorf("salt: %w", err)
	}
	stored, err := dec(c.StoredKey)
	if err != nil {
		return scram.StoredCredentials{}, fmt.Errorf("storedKey: %w", err)
	}
	server, err := dec(c.ServerKey)
	if err != nil {
		return scram.StoredCredentials{}, fmt.Errorf("serverKey: %w", err)
	}
	if len(salt) == 0 || len(stored) != 32 || len(server) != 32 || c.IterationCount < 4096 {
		return scram.StoredCredentials{}, fmt.Errorf("want a salt, 32-byte storedKey and serverKey and iterationCount ≥ 4096")
	}
	return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(salt), Iters: c.IterationCount}, StoredKey: stored, ServerKey: server}, nil
}

// userDoc is a user as stored in admin.system.users (mongod's layout).
type userDoc struct {
	ID          string      `bson:"_id"`
	UserID      bson.Binary `bson:"userId"`
	User        string      `bson:"user"`
	DB          string      `bson:"db"`
	Credentials struct {
		SCRAMSHA256 SCRAMCredentials `bson:"SCRAM-SHA-256"`
	} `bson:"credentials"`
	Roles      bson.A `bson:"roles"`
	CustomData bson.D `bson:"customData,omitempty"`
}

// userStore finds users: those of the Config (in memory) first, then admin.system.users.
// Stored users are read from the engine at each lookup, so dropping admin or the collection
// drops them too, and nothing is cached to go stale.
type userStore struct {
	engine *storage.Engine
	config map[string]userDoc // by userKey
	// drops counts dropUser commands: a connection authenticated before the last one checks
	// that its user still exists (as mongod, dropping a user ends what its sessions may do).
	drops atomic.Int64
}

func userKey(db, name string) string { return db + "." + name }

// CheckUsers reports the first user of users that New would refuse (a bad name, neither or
// both of a password and credentials, credentials that do not decode, a duplicate).
func CheckUsers(users []User) error {
	_, err := configUsers(users)
	return err
}

func configUsers(users []User) (map[string]userDoc, error) {
	config := map[string]userDoc{}
	for i, u := range users {
		d, err := configUser(u)
		if err != nil {
			return nil, fmt.Errorf("user %d (%q): %w", i+1, u.Name, err)
		}
		if _, dup := config[d.ID]; dup {
			return nil, fmt.Errorf("user %d: %s@%s is given twice", i+1, u.Name, d.DB)
		}
		config[d.ID] = d
	}
	return config, nil
}

// configUser checks a Config user and derives its credentials.
func configUser(u User) (userDoc, error) {
	if u.DB == "" {
		u.DB = usersDB
	}
	if err := checkUserName(u.Name, u.DB); err != nil {
		return userDoc{}, err
	}
	d := userDoc{ID: userKey(u.DB, u.Name), User: u.Name, DB: u.DB, Roles: rootRoles()}
	switch {
	case (u.Password == "") == (u.SCRAMSHA256 == nil):
		return userDoc{}, fmt.Errorf("give exactly one of a password or SCRAM-SHA-256 credentials")
	case u.SCRAMSHA256 != nil:
		if _, err := u.SCRAMSHA256.stored(); err != nil {
			return userDoc{}, fmt.Errorf("SCRAM-SHA-256 credentials: %w", err)
		}
		d.Credentials.SCRAMSHA256 = *u.SCRAMSHA256
	default:
		c, err := DeriveSCRAMCredentials(u.Name, u.Password)
		if err != nil {
			return userDoc{}, err
		}
		d.Credentials.SCRAMSHA256 = c
	}
	return d, nil
}

func checkUserName(name, db string) error {
	if name == "" || strings.ContainsRune(name, 0) {
		return mongoerr.BadValuef("User names must be non-empty and not contain NUL")
	}
	if db == "" || strings.ContainsAny(db, "/\\. \"$\x00") || db == "local" || db == "config" {
		return mongoerr.BadValuef("Cannot create users in the %q database", db)
	}
	return nil
}

func rootRoles() bson.A {
	return bson.A{bson.D{{Key: "role", Value: "root"}, {Key: "db", Value: usersDB}}}
}

// lookup returns the user db.name.
func (us *userStore) lookup(db, name string) (userDoc, bool) {
	key := userKey(db, name)
	if d, ok := us.config[key]; ok {
		return d, true
	}
	var d userDoc
	found := false
	us.engine.Read(func(r *storage.Reader) {
		if doc, ok := r.Get(usersDB, usersColl, key); ok {
			found = bson.Unmarshal(doc.Raw, &d) == nil
		}
	})
	return d, found
}

// any reports whether any user exists (the localhost exception ends with the first one).
func (us *userStore) any() bool {
	if len(us.config) > 0 {
		return true
	}
	n := 0
	us.engine.Read(func(r *storage.Reader) { n = r.Count(usersDB, usersColl) })
	return n > 0
}

// list returns the users of db (all databases when db is ""), config users included,
// sorted by _id.
func (us *userStore) list(db string) []userDoc {
	var out []userDoc
	for _, d := range us.config {
		if db == "" || d.DB == db {
			out = append(out, d)
		}
	}
	us.engine.Read(func(r *storage.Reader) {
		r.Find(usersDB, usersColl, nil, func(doc *storage.Doc) bool {
			var d userDoc
			if bson.Unmarshal(doc.Raw, &d) == nil && (db == "" || d.DB == db) {
				if _, shadowed := us.config[d.ID]; !shadowed {
					out = append(out, d)
				}
			}
			return true
		})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// create stores a new user; it fails with 51003 when the user exists.
func (us *userStore) create(ctx context.Context, d userDoc) (storage.OpTime, error) {
	if _, ok := us.config[d.ID]; ok {
		return storage.OpTime{}, mongoerr.New(51003, "User \"%s@%s\" already exists", d.User, d.DB)
	}
	raw, err := bson.Marshal(d)
	if err != nil {
		return storage.OpTime{}, fmt.Errorf("encode user: %w", err)
	}
	var doc bson.D
	if err := bson.Unmarshal(raw, &doc); err != nil {
		return storage.OpTime{}, fmt.Errorf("encode user: %w", err)
	}
	return us.engine.Write(ctx, func(w *storage.Writer) error {
		if _, ok := w.Get(usersDB, usersColl, d.ID); ok {
			return mongoerr.New(51003, "User \"%s@%s\" already exists", d.User, d.DB)
		}
		_, err := w.Insert(usersDB, usersColl, doc)
		return err
	})
}

// drop removes a stored user; it fails with UserNotFound (11) when there is none, and for
// a user of the Config, which only the Config removes.
func (us *userStore) drop(ctx context.Context, db, name string) (storage.OpTime, error) {
	key := userKey(db, name)
	if _, ok := us.config[key]; ok {
		return storage.OpTime{}, mongoerr.New(mongoerr.IllegalOperation, "User \"%s@%s\" comes from the server's configuration (--users FILE): remove it there", name, db)
	}
	defer us.drops.Add(1)
	return us.engine.Write(ctx, func(w *storage.Writer) error {
		doc, ok := w.Get(usersDB, usersColl, key)
		if !ok {
			return mongoerr.New(mongoerr.UserNotFound, "User '%s@%s' not found", name, db)
		}
		return w.Delete(usersDB, usersColl, doc)
	})
}
