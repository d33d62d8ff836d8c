// The atomic MongoDB-wire test server of the Mongo twin's suite (tests/tools/mongo-java-server.sh):
// mongo-java-server 1.47.0 with its in-memory backend, whose collections serialise every write
// (one findAndModify or update at a time per collection), plus what the twin needs and 1.47.0
// gets wrong or lacks:
// - `hello` (MongoDB 5.0), answered like `isMaster` (which already carries `localTime`, the
//   twin's clock sample) with `isWritablePrimary` as MongoDB names it;
// - replies that do not lie (DESIGN §16, issue 31 item 8): the stock collection hands the
//   network layer the live stored document (findAndModify's `value`, every query's and
//   cursor's documents), which is serialised after the collection's lock is released, so a
//   reply could show a later write (16 connections x 2 000 `$inc` through findAndModify
//   returned hundreds of values twice). CopyingCollection deep-copies every document it hands
//   out while it still holds the collection's lock (tests/tools/mjs_inc.c proves it).
//
// usage: java -cp CLASSES:LIB/* BoarddMongoServer HOST PORT [--stock]
//   --stock: the stock collections (live documents in replies), only for the sanity run that
//   shows mjs_inc.c catches the lie (tests/tools/mongo-java-server.sh start --stock).
// Prints "listening on HOST:PORT" once bound; runs until killed (SIGTERM stops it cleanly).
import de.bwaldvogel.mongo.MongoDatabase;
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.backend.ArrayFilters;
import de.bwaldvogel.mongo.backend.CollectionOptions;
import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.QueryResult;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.backend.memory.MemoryCollection;
import de.bwaldvogel.mongo.backend.memory.MemoryDatabase;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.oplog.Oplog;
import io.netty.channel.Channel;
import java.util.ArrayList;
import java.util.List;

public final class BoarddMongoServer {
    /**
     * A memory collection that never lets a stored document out of its lock. Every method that
     * reaches the documents is `synchronized` on the collection (AbstractSynchronizedMongoCollection;
     * count(query) is made so here), and every query result is built by createQueryResult
     * inside it: that is where the documents handed out are copied. The collection's own
     * writers (findAndModify, updateDocuments, deleteDocuments) query too, and must get the
     * stored documents to change them: while one runs, `internal` is non-zero and the query
     * hands back the originals; findAndModify then copies only its `value`.
     */
    static final class CopyingCollection extends MemoryCollection {
        private int internal; // guarded by this (every caller holds the collection's monitor)

        CopyingCollection(MongoDatabase database, String name, CollectionOptions options,
                          CursorRegistry cursors) {
            super(database, name, options, cursors);
        }

        @Override
        protected QueryResult createQueryResult(List<Document> matched, int batchSize) {
            if (internal > 0) {
                return super.createQueryResult(matched, batchSize);
            }
            List<Document> copies = new ArrayList<>(matched.size());
            for (Document d : matched) {
                copies.add(d == null ? null : d.cloneDeeply());
            }
            // The cursor of a large result keeps the rest of this list: copies too.
            return super.createQueryResult(copies, batchSize);
        }

        @Override
        public synchronized Document findAndModify(Document query) {
            Document result;
            internal++;
            try {
                result = super.findAndModify(query);
            } finally {
                internal--;
            }
            Object value = result.get("value");
            if (value instanceof Document) {
                // The stored document itself (return-new, an upsert) or a projection sharing
                // its sub-documents: copied before the lock is released.
                result.put("value", ((Document) value).cloneDeeply());
            }
            return result;
        }

        @Override
        public synchronized Document updateDocuments(Document selector, Document update,
                                                     ArrayFilters arrayFilters, boolean isMulti,
                                                     boolean isUpsert, Oplog oplog) {
            internal++;
            try {
                return super.updateDocuments(selector, update, arrayFilters, isMulti, isUpsert, oplog);
            } finally {
                internal--;
            }
        }

        @Override
        public synchronized int deleteDocuments(Document selector, int limit, Oplog oplog) {
            internal++;
            try {
                return super.deleteDocuments(selector, limit, oplog);
            } finally {
                internal--;
            }
        }

        // Stock 1.47.0 walks the documents here without the lock (a count racing a write).
        @Override
        public synchronized int count(Document query, int skip, int limit) {
            return super.count(query, skip, limit);
        }
    }

    static final class CopyingDatabase extends MemoryDatabase {
        CopyingDatabase(String name, CursorRegistry cursors) {
            super(name, cursors);
        }

        @Override
        protected MemoryCollection openOrCreateCollection(String name, CollectionOptions options) {
            return new CopyingCollection(this, name, options, cursorRegistry);
        }
    }

    static final class BoarddBackend extends MemoryBackend {
        private final boolean stock;

        BoarddBackend(boolean stock) {
            this.stock = stock;
        }

        @Override
        public MemoryDatabase openOrCreateDatabase(String name) {
            return stock ? super.openOrCreateDatabase(name)
                         : new CopyingDatabase(name, getCursorRegistry());
        }

        @Override
        public Document handleCommand(Channel channel, String databaseName, String command,
                                      Document query) {
            if (command.equalsIgnoreCase("hello")) {
                Document response = super.handleCommand(channel, databaseName, "isMaster", query);
                response.put("isWritablePrimary", Boolean.TRUE);
                return response;
            }
            return super.handleCommand(channel, databaseName, command, query);
        }
    }

    public static void main(String[] args) throws Exception {
        boolean stock = args.length == 3 && args[2].equals("--stock");
        if (args.length != 2 && !stock) {
            System.err.println("usage: BoarddMongoServer HOST PORT [--stock]");
            System.exit(2);
        }
        MongoServer server = new MongoServer(new BoarddBackend(stock));
        server.bind(args[0], Integer.parseInt(args[1]));
        Runtime.getRuntime().addShutdownHook(new Thread(server::shutdownNow));
        System.out.println("listening on " + args[0] + ":" + args[1] + (stock ? " (stock)" : ""));
        System.out.flush();
        Thread.currentThread().join();
    }
}
