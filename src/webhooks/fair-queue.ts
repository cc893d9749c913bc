/** Concurrency limits of one {@link FairQueue}. */
export interface FairLimits {
  /** Items in flight at once, whoever they are for. */
  total: number;
  /** Items in flight at once for one partner. */
  perPartner: number;
  /** Items in flight at once for one destination. */
  perDestination: number;
}

/** What the queue needs to know of an item. */
export interface FairItem {
  partnerId: string;
  destinationId: string;
}

interface Destination<T> {
  id: string;
  waiting: T[];
  inFlight: number;
}

interface Partner<T> {
  id: string;
  inFlight: number;
  destinations: Map<string, Destination<T>>;
  /** Destination ids in turn order. */
  ring: string[];
  cursor: number;
}

/**
 * Items waiting for a slot, served fairly: partners take turns (one item each per turn), and each partner's
 * destinations take turns, within three limits (in flight in all, per partner, per destination). A partner or a
 * destination at its limit is passed over and keeps nothing from the others. In memory and synchronous; the
 * caller says when an item it took is finished. Written here because no queue library does this: p-queue and
 * bottleneck limit concurrency per key, but none serves keys in turn under nested (partner, destination) limits.
 */
export class FairQueue<T extends FairItem> {
  readonly #limits: FairLimits;
  readonly #partners = new Map<string, Partner<T>>();
  /** Partner ids in turn order. */
  #ring: string[] = [];
  #cursor = 0;
  #inFlight = 0;
  #waiting = 0;

  constructor(limits: FairLimits) {
    this.#limits = limits;
  }

  /** Items taken and not yet finished. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Items waiting. */
  get waiting(): number {
    return this.#waiting;
  }

  /** True while another item may start (the total limit is not reached). */
  get hasRoom(): boolean {
    return this.#inFlight < this.#limits.total;
  }

  /** Items in flight to a destination. */
  inFlightTo(item: FairItem): number {
    return this.#partners.get(item.partnerId)?.destinations.get(item.destinationId)?.inFlight ?? 0;
  }

  /** Items waiting for the destination of `item`. */
  waitingFor(item: FairItem): number {
    return this.#partners.get(item.partnerId)?.destinations.get(item.destinationId)?.waiting.length ?? 0;
  }

  /** Adds an item at the back of its destination's line; returns how many wait in front of it. */
  push(item: T): number {
    const destination = this.#destination(item);
    destination.waiting.push(item);
    this.#waiting++;
    return destination.waiting.length - 1;
  }

  /**
   * Takes the next item that may start, counting it in flight, or undefined when none may. Destinations for
   * which `blocked` answers true are passed over this time.
   */
  next(blocked: (destinationId: string) => boolean = () => false): T | undefined {
    if (!this.hasRoom) return undefined;
    const partners = this.#ring.length;
    for (let i = 0; i < partners; i++) {
      const at = (this.#cursor + i) % partners;
      const partner = this.#partners.get(this.#ring[at] as string) as Partner<T>;
      if (partner.inFlight >= this.#limits.perPartner) continue;
      const count = partner.ring.length;
      for (let j = 0; j < count; j++) {
        const dAt = (partner.cursor + j) % count;
        const destination = partner.destinations.get(partner.ring[dAt] as string) as Destination<T>;
        if (destination.waiting.length === 0) continue;
        if (destination.inFlight >= this.#limits.perDestination || blocked(destination.id)) continue;
        const item = destination.waiting.shift() as T;
        this.#waiting--;
        destination.inFlight++;
        partner.inFlight++;
        this.#inFlight++;
        // The next turn starts with the next destination of this partner, and with the next partner.
        partner.cursor = (dAt + 1) % count;
        this.#cursor = (at + 1) % partners;
        return item;
      }
    }
    return undefined;
  }

  /** Ends an item taken by {@link next}: its slots are free again. */
  finish(item: T): void {
    const partner = this.#partners.get(item.partnerId);
    const destination = partner?.destinations.get(item.destinationId);
    if (!partner || !destination) return;
    destination.inFlight--;
    partner.inFlight--;
    this.#inFlight--;
    this.#tidy(partner, destination);
  }

  /** Removes and returns the waiting items that `match` (they leave the queue without starting). */
  remove(match: (item: T) => boolean): T[] {
    const out: T[] = [];
    for (const partner of [...this.#partners.values()]) {
      for (const destination of [...partner.destinations.values()]) {
        const keep: T[] = [];
        for (const item of destination.waiting) (match(item) ? out : keep).push(item);
        if (keep.length !== destination.waiting.length) {
          destination.waiting = keep;
          this.#tidy(partner, destination);
        }
      }
    }
    this.#waiting -= out.length;
    return out;
  }

  /** Removes and returns every item waiting for one destination. */
  removeDestination(item: FairItem): T[] {
    const partner = this.#partners.get(item.partnerId);
    const destination = partner?.destinations.get(item.destinationId);
    if (!partner || !destination) return [];
    const out = destination.waiting;
    destination.waiting = [];
    this.#waiting -= out.length;
    this.#tidy(partner, destination);
    return out;
  }

  #destination(item: FairItem): Destination<T> {
    let partner = this.#partners.get(item.partnerId);
    if (!partner) {
      partner = { id: item.partnerId, inFlight: 0, destinations: new Map(), ring: [], cursor: 0 };
      this.#partners.set(partner.id, partner);
      this.#ring.push(partner.id);
    }
    let destination = partner.destinations.get(item.destinationId);
    if (!destination) {
      destination = { id: item.destinationId, waiting: [], inFlight: 0 };
      partner.destinations.set(destination.id, destination);
      partner.ring.push(destination.id);
    }
    return destination;
  }

  /** Forgets a destination with nothing waiting or in flight, and a partner left with no destination. */
  #tidy(partner: Partner<T>, destination: Destination<T>): void {
    if (destination.waiting.length > 0 || destination.inFlight > 0) return;
    partner.destinations.delete(destination.id);
    const d = partner.ring.indexOf(destination.id);
    partner.ring.splice(d, 1);
    if (partner.cursor > d) partner.cursor--;
    if (partner.cursor >= partner.ring.length) partner.cursor = 0;
    if (partner.destinations.size > 0) return;
    this.#partners.delete(partner.id);
    const p = this.#ring.indexOf(partner.id);
    this.#ring.splice(p, 1);
    if (this.#cursor > p) this.#cursor--;
    if (this.#cursor >= this.#ring.length) this.#cursor = 0;
  }
}
