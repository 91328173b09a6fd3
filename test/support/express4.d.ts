declare module "express4" {
  // Express 4 under an alias, to run the same suite on both majors; its API used here matches 5's.
  import express from "express";
  export default express;
}
