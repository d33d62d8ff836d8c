// The atomic MongoDB-wire test server of the Mongo twin's suite (tests/tools/mongo-java-server.sh):
// mongo-java-server 1.47.0 with its in-memory backend, whose collections serialise every write
// (one findAndModify or update at a time per collection), plus the one command the twin needs
// and 1.47.0 lacks: `hello` (MongoDB 5.0), answered like `isMaster` (which already carries
// `localTime`, the twin's clock sample) with `isWritablePrimary` as MongoDB names it.
//
// usage: java -cp CLASSES:LIB/* BoarddMongoServer HOST PORT
// Prints "listening on HOST:PORT" once bound; runs until killed (SIGTERM stops it cleanly).
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.bson.Document;
import io.netty.channel.Channel;

public final class BoarddMongoServer {
    static final class HelloBackend extends MemoryBackend {
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
        if (args.length != 2) {
            System.err.println("usage: BoarddMongoServer HOST PORT");
            System.exit(2);
        }
        MongoServer server = new MongoServer(new HelloBackend());
        server.bind(args[0], Integer.parseInt(args[1]));
        Runtime.getRuntime().addShutdownHook(new Thread(server::shutdownNow));
        System.out.println("listening on " + args[0] + ":" + args[1]);
        System.out.flush();
        Thread.currentThread().join();
    }
}
