// Initiates the replica set rs0 of docker-compose.yml on its first start (later starts find it
// initiated), then waits until it has a primary, so the services that depend on this one-shot
// find a writable deployment. Run by the mongo-init service: mongosh --host mongo1 --file ...
const members = [
  { _id: 0, host: "mongo1:27017", priority: 2 },
  { _id: 1, host: "mongo2:27017", priority: 1 },
  { _id: 2, host: "mongo3:27017", priority: 1 },
];
try {
  rs.status();
  print("replica set rs0 already initiated");
} catch (e) {
  if (e.codeName !== "NotYetInitialized") {
    throw e;
  }
  rs.initiate({ _id: "rs0", members: members });
  print("replica set rs0 initiated");
}
const deadline = Date.now() + 120 * 1000;
for (;;) {
  let primary = null;
  try {
    primary = rs.status().members.find((m) => m.stateStr === "PRIMARY");
  } catch (e) {
    // Right after rs.initiate the status may be briefly unavailable.
  }
  if (primary) {
    print("replica set rs0 primary: " + primary.name);
    break;
  }
  if (Date.now() > deadline) {
    print("replica set rs0 has no primary after 120 s");
    quit(1);
  }
  sleep(500);
}
