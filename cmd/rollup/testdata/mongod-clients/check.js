// Run by TestMongodOfficialClients: node check.js GOOD_URI BAD_URI. With GOOD_URI it writes a
// document and prints what it reads back (1); with BAD_URI (a wrong password) it prints the
// server's error code (18).
const { MongoClient } = require('mongodb');

(async () => {
  const good = new MongoClient(process.argv[2], { serverSelectionTimeoutMS: 10000 });
  try {
    const coll = good.db('rollup_clients').collection('node');
    await coll.insertOne({ _id: 'node', v: 1 });
    console.log((await coll.findOne({ _id: 'node' })).v);
  } finally {
    await good.close();
  }
  const bad = new MongoClient(process.argv[3], { serverSelectionTimeoutMS: 10000 });
  try {
    await bad.db('admin').command({ ping: 1 });
    console.log('no error');
  } catch (e) {
    console.log(e.code);
  } finally {
    await bad.close();
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
