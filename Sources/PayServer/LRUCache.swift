/// At most `capacity` entries; when full, setting a new key drops the least recently used entry (read or set)
/// and nothing else. Lookups, sets and evictions take constant time. Not synchronized: its owner guards it.
struct LRUCache<Key: Hashable, Value> {
    private struct Node {
        var key: Key
        var value: Value
        /// Toward the most recently used; -1 at the head.
        var newer: Int
        /// Toward the least recently used; -1 at the tail.
        var older: Int
    }

    /// The most entries kept.
    let capacity: Int
    private var slots: [Key: Int] = [:]
    private var nodes: [Node] = []
    /// The most recently used entry's slot, -1 when empty.
    private var newest = -1
    /// The least recently used entry's slot, -1 when empty.
    private var oldest = -1

    init(capacity: Int) {
        precondition(capacity > 0, "an LRU cache keeps at least one entry")
        self.capacity = capacity
    }

    /// Entries kept.
    var count: Int { slots.count }

    /// The value for `key`, which becomes the most recently used.
    mutating func value(for key: Key) -> Value? {
        guard let slot = slots[key] else { return nil }
        moveToFront(slot)
        return nodes[slot].value
    }

    /// Whether `key` is kept, without changing the order.
    func contains(_ key: Key) -> Bool { slots[key] != nil }

    /// Sets `key`'s value and makes it the most recently used; when full, the least recently used entry goes.
    mutating func set(_ value: Value, for key: Key) {
        if let slot = slots[key] {
            nodes[slot].value = value
            moveToFront(slot)
            return
        }
        let slot: Int
        if nodes.count < capacity {
            slot = nodes.count
            nodes.append(Node(key: key, value: value, newer: -1, older: -1))
        } else {
            slot = oldest
            unlink(slot)
            slots[nodes[slot].key] = nil
            nodes[slot].key = key
            nodes[slot].value = value
        }
        slots[key] = slot
        linkFront(slot)
    }

    private mutating func moveToFront(_ slot: Int) {
        guard newest != slot else { return }
        unlink(slot)
        linkFront(slot)
    }

    private mutating func unlink(_ slot: Int) {
        let (newer, older) = (nodes[slot].newer, nodes[slot].older)
        if newer >= 0 { nodes[newer].older = older } else { newest = older }
        if older >= 0 { nodes[older].newer = newer } else { oldest = newer }
        nodes[slot].newer = -1
        nodes[slot].older = -1
    }

    private mutating func linkFront(_ slot: Int) {
        nodes[slot].newer = -1
        nodes[slot].older = newest
        if newest >= 0 { nodes[newest].newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }
}
