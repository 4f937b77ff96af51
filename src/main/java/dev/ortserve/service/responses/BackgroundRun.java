package dev.ortserve.service.responses;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.store.record.StoredResponse;
import io.smallrye.mutiny.Multi;

/**
 * An admitted generation that {@link BackgroundRuns} runs detached from its request: the Responses
 * protocol builds it, this package stores its record, events and end without reading any wire type.
 */
public interface BackgroundRun {

    String id();

    /** The record the run is stored with before it starts. */
    StoredResponse queued();

    /** The event stream: each element the events of one step. */
    Multi<java.util.List<ResponseEvent>> events();

    /** Whether this replica has stored the run's end itself. */
    boolean finishedHere();

    /**
     * Whether the run has asked the store to record its end (true before the store answers: a lease renewal that finds
     * the run ended in that moment found this end, not another party's).
     */
    boolean finishing();

    /** Whether another replica (a cancel, a lapse) ended the run first. */
    boolean endedElsewhere();

    /** The record of a run stopped before its end (cancelled, failed): what it had generated so far. */
    StoredResponse interrupted(String status, ObjectNode error);

    /** Drops an admitted generation that will never be read (its run could not be stored). */
    void abandon();
}
