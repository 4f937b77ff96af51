package dev.ortserve.store;

import dev.ortserve.store.record.Conversation;
import dev.ortserve.store.record.ResponseIds;
import dev.ortserve.store.record.RunState;
import dev.ortserve.store.record.StoredEvent;
import dev.ortserve.store.record.StoredResponse;

import io.quarkus.redis.datasource.ReactiveRedisDataSource;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.redis.client.Response;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Conversations in Redis, shared by every replica. Layout: one hash per conversation,
 * {@code ortserve:conv:{<conversation>}}, whose fields are {@code r:<response id>} (the encoded
 * record), {@code o:<response id>} (its owner digest) and {@code bytes} (the conversation's size).
 * One key per conversation means one hash slot on Redis Cluster, one TTL that every write and
 * every continuation refreshes for the whole chain, and a rebuild of any depth in one round trip
 * (a script doing HGETALL + PEXPIRE). Writes and deletes are scripts too, so caps and byte counts
 * are checked and updated atomically.
 */
public class RedisResponseStore implements ResponseStore {

    static final String PUT = """
            local total = tonumber(redis.call('HGET', KEYS[1], 'bytes') or '0')
            local added = tonumber(ARGV[3]) - redis.call('HSTRLEN', KEYS[1], 'r:' .. ARGV[1])
            if total + added > tonumber(ARGV[4]) then return {0, total} end
            redis.call('HSET', KEYS[1], 'r:' .. ARGV[1], ARGV[2], 'o:' .. ARGV[1], ARGV[6])
            redis.call('HINCRBY', KEYS[1], 'bytes', added)
            redis.call('PEXPIRE', KEYS[1], ARGV[5])
            return {1, total + added}
            """;

    static final String CHAIN = """
            local all = redis.call('HGETALL', KEYS[1])
            if #all > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
            return all
            """;

    static final String DELETE = """
            if redis.call('HGET', KEYS[1], 'o:' .. ARGV[1]) ~= ARGV[2] then return 0 end
            local len = redis.call('HSTRLEN', KEYS[1], 'r:' .. ARGV[1])
            redis.call('HDEL', KEYS[1], 'r:' .. ARGV[1], 'o:' .. ARGV[1], 's:' .. ARGV[1], 'l:' .. ARGV[1], 'c:' .. ARGV[1])
            redis.call('DEL', KEYS[2])
            redis.call('HINCRBY', KEYS[1], 'bytes', -len)
            if redis.call('HLEN', KEYS[1]) <= 1 then redis.call('DEL', KEYS[1]) end
            return 1
            """;

    /** Milliseconds by the Redis server's clock, so every replica judges leases by the same clock. */
    private static final String NOW = """
            local t = redis.call('TIME')
            local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
            """;

    private static final String RUNNING = """
            local s = redis.call('HGET', KEYS[1], 's:' .. ARGV[1])
            local running = s == 'queued' or s == 'in_progress'
            """;

    /** PUT plus the run's fields: status queued, a lease deadline. */
    static final String START = NOW + """
            local total = tonumber(redis.call('HGET', KEYS[1], 'bytes') or '0')
            local added = tonumber(ARGV[3]) - redis.call('HSTRLEN', KEYS[1], 'r:' .. ARGV[1])
            if total + added > tonumber(ARGV[4]) then return {0, total} end
            redis.call('HSET', KEYS[1], 'r:' .. ARGV[1], ARGV[2], 'o:' .. ARGV[1], ARGV[6], 's:' .. ARGV[1], 'queued',
                'l:' .. ARGV[1], tostring(now + tonumber(ARGV[7])))
            redis.call('HINCRBY', KEYS[1], 'bytes', added)
            redis.call('PEXPIRE', KEYS[1], ARGV[5])
            return {1, total + added}
            """;

    static final String STATE = NOW + """
            local v = redis.call('HMGET', KEYS[1], 's:' .. ARGV[1], 'l:' .. ARGV[1], 'c:' .. ARGV[1])
            if not v[1] then return {} end
            return {v[1], tostring(tonumber(v[2] or '0') - now), v[3] or '0'}
            """;

    static final String RENEW = NOW + RUNNING + """
            if not running then return -1 end
            redis.call('HSET', KEYS[1], 's:' .. ARGV[1], ARGV[2], 'l:' .. ARGV[1], tostring(now + tonumber(ARGV[3])))
            if redis.call('HGET', KEYS[1], 'c:' .. ARGV[1]) == '1' then return 1 end
            return 0
            """;

    /** Ends a run once: record, status, and the terminal event numbered after the last one. */
    static final String FINISH = NOW + RUNNING + """
            if not running then return {0, 0} end
            if ARGV[8] == '1' and tonumber(redis.call('HGET', KEYS[1], 'l:' .. ARGV[1]) or '0') > now then return {0, 0} end
            local total = tonumber(redis.call('HGET', KEYS[1], 'bytes') or '0')
            local added = tonumber(ARGV[3]) - redis.call('HSTRLEN', KEYS[1], 'r:' .. ARGV[1])
            if total + added > tonumber(ARGV[4]) then return {-1, total} end
            redis.call('HSET', KEYS[1], 'r:' .. ARGV[1], ARGV[2], 'o:' .. ARGV[1], ARGV[6], 's:' .. ARGV[1], ARGV[7])
            redis.call('HDEL', KEYS[1], 'c:' .. ARGV[1])
            redis.call('HINCRBY', KEYS[1], 'bytes', added)
            redis.call('PEXPIRE', KEYS[1], ARGV[5])
            if ARGV[9] ~= '' then
                local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
                local seq = 0
                if #last > 0 then seq = tonumber(string.match(last[1][1], '^(%d+)')) + 1 end
                local frame = string.gsub(ARGV[9], '"sequence_number":%-1', '"sequence_number":' .. seq, 1)
                redis.call('XADD', KEYS[2], seq .. '-1', 'e', frame)
                redis.call('PEXPIRE', KEYS[2], ARGV[5])
            end
            return {1, total + added}
            """;

    static final String CANCEL = RUNNING + """
            if not running then return 0 end
            redis.call('HSET', KEYS[1], 'c:' .. ARGV[1], '1')
            redis.call('PUBLISH', ARGV[2], ARGV[1])
            return 1
            """;

    static final String APPEND = """
            for i = 3, #ARGV do
                redis.call('XADD', KEYS[1], (tonumber(ARGV[2]) + i - 3) .. '-1', 'e', ARGV[i])
            end
            redis.call('PEXPIRE', KEYS[1], ARGV[1])
            return 1
            """;

    /** The pub/sub channel that carries cancellations to every replica. */
    static final String CANCEL_CHANNEL = "ortserve:cancel";

    private final ReactiveRedisDataSource redis;
    private final Duration ttl;
    private final int maxRecordBytes;
    private final long maxConversationBytes;
    private final Duration timeout;

    public RedisResponseStore(ReactiveRedisDataSource redis, Duration ttl, int maxRecordBytes, long maxConversationBytes, Duration timeout) {
        this.redis = redis;
        this.ttl = ttl;
        this.maxRecordBytes = maxRecordBytes;
        this.maxConversationBytes = maxConversationBytes;
        this.timeout = timeout;
    }

    public static String key(String responseId) {
        return "ortserve:conv:{" + ResponseIds.conversationOf(responseId) + "}";
    }

    /** The Redis Stream of a background response's events; same hash slot as its conversation. */
    public static String eventsKey(String responseId) {
        return "ortserve:events:{" + ResponseIds.conversationOf(responseId) + "}:" + responseId;
    }

    @Override
    public Uni<StoredResponse> get(String id, String owner) {
        if (!ResponseIds.isResponseId(id)) return Uni.createFrom().nullItem();
        return guarded(redis.execute("HGET", key(id), "r:" + id)).map(reply -> {
            if (reply == null) return null;
            StoredResponse r = StoredResponseCodec.decode(reply.toString());
            return r.owner().equals(owner) ? r : null;
        });
    }

    @Override
    public Uni<Conversation> chain(String id, String owner) {
        if (!ResponseIds.isResponseId(id)) return Uni.createFrom().nullItem();
        return guarded(redis.execute("EVAL", CHAIN, "1", key(id), Long.toString(ttl.toMillis()))).map(reply -> {
            if (reply == null || reply.size() == 0) return null;
            List<String> records = new ArrayList<>();
            long bytes = 0;
            for (int i = 0; i + 1 < reply.size(); i += 2) {
                String field = reply.get(i).toString();
                if (field.startsWith("r:")) records.add(reply.get(i + 1).toString());
                else if (field.equals("bytes")) bytes = reply.get(i + 1).toLong();
            }
            return ConversationChains.walk(records, id, owner, bytes);
        });
    }

    @Override
    public Uni<Void> put(StoredResponse response) {
        String encoded = StoredResponseCodec.encode(response);
        int size = StoredResponseCodec.sizeOf(encoded);
        if (size > maxRecordBytes) return Uni.createFrom().failure(new RecordTooLargeException(size, maxRecordBytes));
        return guarded(redis.execute("EVAL", PUT, "1", key(response.id()), response.id(), encoded, Integer.toString(size),
                Long.toString(maxConversationBytes), Long.toString(ttl.toMillis()), response.owner())).map(reply -> {
            if (reply.get(0).toInteger() == 0) {
                throw new ConversationFullException(reply.get(1).toLong(), size, maxConversationBytes);
            }
            return null;
        });
    }

    @Override
    public Uni<Boolean> delete(String id, String owner) {
        if (!ResponseIds.isResponseId(id)) return Uni.createFrom().item(false);
        return guarded(redis.execute("EVAL", DELETE, "2", key(id), eventsKey(id), id, owner)).map(reply -> reply.toInteger() == 1);
    }

    @Override
    public Uni<Void> ping() {
        return guarded(redis.execute("PING")).replaceWithVoid();
    }

    @Override
    public Uni<Void> startRun(StoredResponse queued, Duration lease) {
        String encoded = StoredResponseCodec.encode(queued);
        int size = StoredResponseCodec.sizeOf(encoded);
        if (size > maxRecordBytes) return Uni.createFrom().failure(new RecordTooLargeException(size, maxRecordBytes));
        return guarded(redis.execute("EVAL", START, "1", key(queued.id()), queued.id(), encoded, Integer.toString(size),
                Long.toString(maxConversationBytes), Long.toString(ttl.toMillis()), queued.owner(), Long.toString(lease.toMillis()))).map(reply -> {
            if (reply.get(0).toInteger() == 0) throw new ConversationFullException(reply.get(1).toLong(), size, maxConversationBytes);
            return null;
        });
    }

    @Override
    public Uni<RunState> runState(String id) {
        if (!ResponseIds.isResponseId(id)) return Uni.createFrom().nullItem();
        return guarded(redis.execute("EVAL", STATE, "1", key(id), id)).map(reply -> reply == null || reply.size() == 0 ? null
                : new RunState(reply.get(0).toString(), Long.parseLong(reply.get(1).toString()), "1".equals(reply.get(2).toString())));
    }

    @Override
    public Uni<Integer> renewRun(String id, String status, Duration lease) {
        return guarded(redis.execute("EVAL", RENEW, "1", key(id), id, status, Long.toString(lease.toMillis()))).map(Response::toInteger);
    }

    @Override
    public Uni<Boolean> finishRun(StoredResponse last, String terminalEvent, boolean onlyIfLapsed) {
        String encoded = StoredResponseCodec.encode(last);
        int size = StoredResponseCodec.sizeOf(encoded);
        if (size > maxRecordBytes) return Uni.createFrom().failure(new RecordTooLargeException(size, maxRecordBytes));
        return guarded(redis.execute("EVAL", FINISH, "2", key(last.id()), eventsKey(last.id()), last.id(), encoded, Integer.toString(size),
                Long.toString(maxConversationBytes), Long.toString(ttl.toMillis()), last.owner(), last.response().path("status").asText(),
                onlyIfLapsed ? "1" : "0", terminalEvent == null ? "" : terminalEvent)).map(reply -> {
            int result = reply.get(0).toInteger();
            if (result == -1) throw new ConversationFullException(reply.get(1).toLong(), size, maxConversationBytes);
            return result == 1;
        });
    }

    @Override
    public Uni<Boolean> requestCancel(String id) {
        return guarded(redis.execute("EVAL", CANCEL, "1", key(id), id, CANCEL_CHANNEL)).map(reply -> reply.toInteger() == 1);
    }

    @Override
    public Uni<Void> appendEvents(String id, long first, List<String> events) {
        if (events.isEmpty()) return Uni.createFrom().voidItem();
        List<String> args = new ArrayList<>(List.of("EVAL", APPEND, "1", eventsKey(id), Long.toString(ttl.toMillis()), Long.toString(first)));
        args.addAll(events);
        return guarded(redis.execute(args.get(0), args.subList(1, args.size()).toArray(String[]::new))).replaceWithVoid();
    }

    @Override
    public Uni<List<StoredEvent>> events(String id, long after, int max) {
        return guarded(redis.execute("XRANGE", eventsKey(id), (after + 1) + "-0", "+", "COUNT", Integer.toString(max))).map(reply -> {
            List<StoredEvent> out = new ArrayList<>();
            if (reply == null) return out;
            for (Response entry : reply) {
                String streamId = entry.get(0).toString();
                long seq = Long.parseLong(streamId.substring(0, streamId.indexOf('-')));
                Response fields = entry.get(1);
                for (int i = 0; i + 1 < fields.size(); i += 2) {
                    if (fields.get(i).toString().equals("e")) out.add(new StoredEvent(seq, fields.get(i + 1).toString()));
                }
            }
            return out;
        });
    }

    @Override
    public io.smallrye.mutiny.Multi<String> cancellations() {
        // a dropped subscription (Redis restarted) is made again; a missed message is still seen by the running replica's next renewal
        return redis.pubsub(String.class).subscribe(CANCEL_CHANNEL)
                .onCompletion().failWith(() -> new StoreUnavailableException("the cancellation subscription ended", null))
                .onFailure().retry().withBackOff(Duration.ofMillis(500), Duration.ofSeconds(10)).indefinitely();
    }

    private <T> Uni<T> guarded(Uni<T> operation) {
        return operation.ifNoItem().after(timeout)
                .failWith(() -> new StoreUnavailableException("Redis did not answer within " + timeout.toMillis() + " ms", null))
                .onFailure(f -> !(f instanceof StoreUnavailableException))
                .transform(f -> new StoreUnavailableException("Redis is unreachable: " + f.getMessage(), f));
    }

}
