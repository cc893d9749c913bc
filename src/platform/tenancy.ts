import type { Em } from "./db/orm.ts";

/** The two environments (CONTRACT.md §2). One deployment serves both; the API key decides. */
export const environments = ["sandbox", "production"] as const;

/** An environment. */
export type Environment = (typeof environments)[number];

/**
 * The sandbox fixture lender: the reserved partner that lent the sandbox fixture users their past loans. It has
 * no keys and is never a caller; every sandbox tenant reads its rows beside its own (the fixture users' standing
 * and repayment history), partner lists leave it out, and retention never purges it.
 */
export const FIXTURE_LENDER_ID = "ptn_00000000000000000000SANDBX";

/** Who is calling: established from the API key at the edge, read by every partner handler. */
export interface Caller {
  keyId: string;
  partnerId: string;
  environment: Environment;
}

/** The partner and environment every partner-owned row belongs to. */
export interface Tenant {
  partnerId: string;
  environment: Environment;
}

/** The name of the MikroORM filter that scopes partner-owned entities to one tenant. */
export const TENANT = "tenant";

/**
 * The tenancy boundary (ARCHITECTURE.md "Data"): a MikroORM filter on every partner-owned entity, on by
 * default and with no default arguments. The edge sets the caller's partner and environment once on the
 * request's EntityManager (and every fork and transaction of it inherits them); a query on a partner-owned
 * entity without them throws instead of reading every tenant's rows. Work that is not a partner's (the
 * delivery worker, sweeps, the platform's internal API) says so on each query with {@link everyTenant}.
 */
export const tenantFilter = {
  [TENANT]: {
    name: TENANT,
    cond: (t: Tenant) => ({ partnerId: t.partnerId, environment: t.environment }),
    default: true,
  },
};

/** Scopes `em` (and what is forked from it) to the caller's partner and environment. */
export function scopeToTenant(em: Em, tenant: Tenant): void {
  em.setFilterParams(TENANT, { partnerId: tenant.partnerId, environment: tenant.environment });
}

/** The tenant `em` is scoped to; throws when it is not scoped (a partner handler always is). */
export function tenantOf(em: Em): Tenant {
  const tenant = em.getFilterParams<Tenant>(TENANT);
  if (!tenant) throw new Error("this unit of work is not scoped to a tenant");
  return tenant;
}

/** Find options for system work that reads across tenants, spelled out on each query. */
export const everyTenant = { filters: { [TENANT]: false } } as const;
