// Adds the two shard replica sets of docker-compose.yml's "sharded" profile to the cluster
// through the mongos, once (a later start finds them listed). rollup migrate then shards the
// counts collection (docs/scaling.md). Run by the sharded-init service:
// mongosh --host sharded-mongos:27017 --file /deploy/mongo-sharded-shards.js
const shards = ["shard1/sharded-shard1:27017", "shard2/sharded-shard2:27017"];
const listed = db.adminCommand({ listShards: 1 }).shards.map((s) => s._id);
for (const shard of shards) {
  const name = shard.split("/")[0];
  if (listed.includes(name)) {
    print("shard " + name + " already added");
    continue;
  }
  db.adminCommand({ addShard: shard, name: name });
  print("added shard " + shard);
}
