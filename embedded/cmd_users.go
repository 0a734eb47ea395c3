package embedded

import (
	"context"
	"crypto/rand"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// createUser's and usersInfo's options; any other answers NotImplemented naming it.
var (
	createUserFields = []string{"pwd", "roles", "customData", "mechanisms", "digestPassword"}
	usersInfoFields  = []string{"showCredentials", "showCustomData", "forAllDBs"} // filter, showPrivileges, showAuthenticationRestrictions: 238 (options.go)
)

// cmdCreateUser stores a user with SCRAM-SHA-256 credentials derived from pwd (never the
// password). Every user of the embedded server has all privileges, so roles must say root.
func cmdCreateUser(ctx context.Context, s *Server, r *request) (result, error) {
	name, ok := r.body[0].Value.(string)
	if !ok {
		return result{}, mongoerr.TypeMismatchf("BSON field 'createUser.createUser' is the wrong type '%s', expected type 'string'", typeName(r.body[0].Value))
	}
	if err := checkUserName(name, r.db); err != nil {
		return result{}, err
	}
	pwd, ok := r.arg("pwd")
	if !ok {
		return result{}, mongoerr.BadValuef("Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db")
	}
	password, ok := pwd.(string)
	if !ok || password == "" {
		return result{}, mongoerr.BadValuef("User passwords must not be empty")
	}
	if v, ok := r.arg("digestPassword"); ok && !boolArg(v) {
		return result{}, mongoerr.BadValuef("Use of SCRAM-SHA-256 requires undigested passwords")
	}
	if v, ok := r.arg("mechanisms"); ok {
		for _, m := range asArray(v) {
			if m != scramMech {
				return result{}, mongoerr.NotImplementedf("authentication mechanism %v (only %s)", m, scramMech)
			}
		}
	}
	roles, ok := r.arg("roles")
	if !ok {
		return result{}, mongoerr.New(mongoerr.IDLUnknownField, "BSON field 'createUser.roles' is missing but a required field")
	}
	if err := checkRootRoles(roles, r.db); err != nil {
		return result{}, err
	}
	creds, err := DeriveSCRAMCredentials(name, password)
	if err != nil {
		return result{}, mongoerr.BadValuef("Error preflighting password: %v", err)
	}
	d := userDoc{ID: userKey(r.db, name), UserID: bson.Binary{Subtype: 4, Data: newUUID()}, User: name, DB: r.db, Roles: rootRoles()}
	d.Credentials.SCRAMSHA256 = creds
	if v, ok := r.arg("customData"); ok {
		cd, isDoc := v.(bson.D)
		if !isDoc {
			return result{}, mongoerr.TypeMismatchf("BSON field 'createUser.customData' is the wrong type '%s', expected type 'object'", typeName(v))
		}
		d.CustomData = cd
	}
	op, err := s.users.create(ctx, d)
	if err != nil {
		return result{}, err
	}
	return result{opTime: op}, nil
}

// checkRootRoles accepts roles that say root ("root" in admin, or {role: "root", db:
// "admin"}): the embedded server does not enforce roles, so a lesser role would be a silent
// grant of everything.
func checkRootRoles(v any, db string) error {
	roles, ok := v.(bson.A)
	if !ok {
		return mongoerr.TypeMismatchf("BSON field 'createUser.roles' is the wrong type '%s', expected type 'array'", typeName(v))
	}
	for _, role := range roles {
		name, rdb := role, any(db)
		if d, ok := role.(bson.D); ok {
			name, _ = bsonval.Get(d, "role")
			rdb, _ = bsonval.Get(d, "db")
		}
		if name != "root" || rdb != usersDB {
			return mongoerr.NotImplementedf("role %v@%v: every user of the embedded server has all privileges, so createUser takes roles: [{role: \"root\", db: \"admin\"}] only", name, rdb)
		}
	}
	if len(roles) == 0 {
		return mongoerr.NotImplementedf("users without roles: every user of the embedded server has all privileges, so createUser takes roles: [{role: \"root\", db: \"admin\"}] only")
	}
	return nil
}

func cmdDropUser(ctx context.Context, s *Server, r *request) (result, error) {
	name, ok := r.body[0].Value.(string)
	if !ok {
		return result{}, mongoerr.TypeMismatchf("BSON field 'dropUser.dropUser' is the wrong type '%s', expected type 'string'", typeName(r.body[0].Value))
	}
	op, err := s.users.drop(ctx, r.db, name)
	if err != nil {
		return result{}, err
	}
	return result{opTime: op}, nil
}

// cmdUsersInfo answers usersInfo: 1 (the users of $db), "name", {user, db} or an array of
// them, or forAllDBs; showCredentials adds the stored SCRAM keys (never a password).
func cmdUsersInfo(_ context.Context, s *Server, r *request) (result, error) {
	var users []userDoc
	if v, ok := r.arg("forAllDBs"); ok && boolArg(v) {
		users = s.users.list("")
	} else {
		var err error
		if users, err = s.usersNamed(r.body[0].Value, r.db); err != nil {
			return result{}, err
		}
	}
	showCreds := false
	if v, ok := r.arg("showCredentials"); ok {
		showCreds = boolArg(v)
	}
	out := bson.A{}
	for _, u := range users {
		d := bson.D{{Key: "_id", Value: u.ID}}
		if len(u.UserID.Data) > 0 {
			d = append(d, bson.E{Key: "userId", Value: u.UserID})
		}
		d = append(d, bson.E{Key: "user", Value: u.User}, bson.E{Key: "db", Value: u.DB})
		if u.CustomData != nil {
			d = append(d, bson.E{Key: "customData", Value: u.CustomData})
		}
		d = append(d, bson.E{Key: "roles", Value: u.Roles})
		if showCreds {
			c := u.Credentials.SCRAMSHA256
			d = append(d, bson.E{Key: "credentials", Value: bson.D{{Key: scramMech, Value: bson.D{
				{Key: "iterationCount", Value: int32(c.IterationCount)}, {Key: "salt", Value: c.Salt},
				{Key: "storedKey", Value: c.StoredKey}, {Key: "serverKey", Value: c.ServerKey},
			}}}})
		}
		d = append(d, bson.E{Key: "mechanisms", Value: bson.A{scramMech}})
		out = append(out, d)
	}
	return result{fields: bson.D{{Key: "users", Value: out}}}, nil
}

// usersNamed resolves usersInfo's argument.
func (s *Server) usersNamed(v any, db string) ([]userDoc, error) {
	switch x := v.(type) {
	case string:
		if u, ok := s.users.lookup(db, x); ok {
			return []userDoc{u}, nil
		}
		return nil, nil
	case bson.D:
		name, _ := bsonval.Get(x, "user")
		udb, _ := bsonval.Get(x, "db")
		n, ok1 := name.(string)
		d, ok2 := udb.(string)
		if !ok1 || !ok2 {
			return nil, mongoerr.BadValuef("User name must contain 'user' and 'db' fields")
		}
		return s.usersNamed(n, d)
	case bson.A:
		var out []userDoc
		for _, e := range x {
			us, err := s.usersNamed(e, db)
			if err != nil {
				return nil, err
			}
			out = append(out, us...)
		}
		return out, nil
	}
	if n, ok := toInt64(v); ok && n == 1 {
		return s.users.list(db), nil
	}
	return nil, mongoerr.BadValuef("User and role names must be either strings or objects")
}

func asArray(v any) bson.A {
	a, _ := v.(bson.A)
	return a
}

// newUUID returns a random (version 4) UUID, as mongod's userId.
func newUUID() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return b
}
