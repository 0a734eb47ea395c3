// Initiates the replica sets of docker-compose.yml's "sharded" profile on their first start
// (later starts find them initiated): the config server set cfgrs and the shard sets shard1
// and shard2, one member each in the demo. Then waits until each has a primary, so the mongos
// that depends on this one-shot finds its config servers. Run by the sharded-rs-init service:
// mongosh --host sharded-cfg:27017 --file /deploy/mongo-sharded-init.js
const sets = [
  { _id: "cfgrs", configsvr: true, members: [{ _id: 0, host: "sharded-cfg:27017" }] },
  { _id: "shard1", members: [{ _id: 0, host: "sharded-shard1:27017" }] },
  { _id: "shard2", members: [{ _id: 0, host: "sharded-shard2:27017" }] },
];

// status returns a set's replSetGetStatus, or {ok: 0, codeName} when the command fails
// (mongosh throws on ok: 0).
function status(admin) {
  try {
    return admin.runCommand({ replSetGetStatus: 1 });
  } catch (e) {
    return { ok: 0, codeName: e.codeName, errmsg: String(e) };
  }
}

for (const set of sets) {
  const admin = new Mongo(set.members[0].host).getDB("admin");
  const st = status(admin);
  if (st.ok === 1) {
    print("replica set " + set._id + " already initiated");
    continue;
  }
  if (st.codeName !== "NotYetInitialized") {
    throw new Error("replica set " + set._id + ": " + tojson(st));
  }
  admin.runCommand({ replSetInitiate: set });
  print("replica set " + set._id + " initiated");
}

const deadline = Date.now() + 120 * 1000;
for (const set of sets) {
  const admin = new Mongo(set.members[0].host).getDB("admin");
  for (;;) {
    const st = status(admin);
    const primary = st.ok === 1 ? st.members.find((m) => m.stateStr === "PRIMARY") : null;
    if (primary) {
      print("replica set " + set._id + " primary: " + primary.name);
      break;
    }
    if (Date.now() > deadline) {
      print("replica set " + set._id + " has no primary after 120 s");
      quit(1);
    }
    sleep(500);
  }
}
