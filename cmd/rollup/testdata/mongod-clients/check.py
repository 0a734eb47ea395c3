# Run by TestMongodOfficialClients: python3 check.py GOOD_URI BAD_URI. With GOOD_URI it writes
# a document and prints what it reads back (1); with BAD_URI (a wrong password) it prints the
# server's error code (18).
import sys

import pymongo
from pymongo.errors import OperationFailure

good = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)
coll = good.rollup_clients.python
coll.insert_one({"_id": "py", "v": 1})
print(coll.find_one({"_id": "py"})["v"])
good.close()

bad = pymongo.MongoClient(sys.argv[2], serverSelectionTimeoutMS=10000)
try:
    bad.admin.command("ping")
    print("no error")
except OperationFailure as e:
    print(e.code)
finally:
    bad.close()
